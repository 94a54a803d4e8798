// Reading user C++ kernels with Clang libTooling; see cppkernel.hpp.
//
// resolve() runs one ToolInvocation (-fsyntax-only) over the named file. The
// AST consumer skips the bodies of functions outside that file, walks the
// namespace-scope declarations once to find the kernel's overloads, and
// checks each of them while the AST is alive; it returns plain data
// (KernelInfo and wfgen Diagnostics). Nothing here throws through LLVM
// frames (LLVM is built without exceptions): errors are collected and
// thrown after the invocation has returned.
#include "wfgen/cppkernel/cppkernel.hpp"

#include <cerrno>
#include <cstring>
#include <exception>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include <clang/AST/ASTConsumer.h>
#include <clang/AST/ASTContext.h>
#include <clang/AST/Decl.h>
#include <clang/AST/DeclCXX.h>
#include <clang/AST/DeclTemplate.h>
#include <clang/AST/Expr.h>
#include <clang/AST/Type.h>
#include <clang/Basic/Diagnostic.h>
#include <clang/Basic/FileManager.h>
#include <clang/Basic/SourceManager.h>
#include <clang/Frontend/CompilerInstance.h>
#include <clang/Frontend/FrontendAction.h>
#include <clang/Lex/Lexer.h>
#include <clang/Tooling/Tooling.h>
#include <llvm/ADT/SmallString.h>
#include <llvm/Support/raw_ostream.h>

#ifndef WFGEN_CLANG_RESOURCE_DIR
#error "WFGEN_CLANG_RESOURCE_DIR must name the resource directory of the Clang linked in"
#endif
#ifndef WFGEN_RUNTIME_INCLUDE_DIR
#error "WFGEN_RUNTIME_INCLUDE_DIR must name runtime/include"
#endif

namespace wfgen::cppkernel {

namespace {

// The runtime headers user kernels include. An installed wfgen
// (<prefix>/bin/wfgen) finds them in <prefix>/include, so the install can
// move; a wfgen in its build tree uses the source tree's runtime/include.
std::string runtime_include_dir() {
  static const std::string dir = [] {
    std::error_code ec;
    std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (!ec) {
      std::filesystem::path installed = exe.parent_path().parent_path() / "include";
      if (std::filesystem::exists(installed / "wfgen" / "kernel_support.hpp", ec)) return installed.string();
    }
    return std::string(WFGEN_RUNTIME_INCLUDE_DIR);
  }();
  return dir;
}

}  // namespace

const char* param_kind_name(ParamKind kind) {
  switch (kind) {
    case ParamKind::TensorIn: return "input view";
    case ParamKind::TensorOut: return "output view";
    case ParamKind::Int: return "integer";
    case ParamKind::Float: return "float";
    case ParamKind::Bool: return "bool";
    case ParamKind::Ints: return "list of integers";
    case ParamKind::Floats: return "list of floats";
  }
  return "?";
}


bool Overload::serves(rt::DType d, int r) const {
  return (!dtype || *dtype == d) && (!rank || *rank == r);
}

const Overload& KernelInfo::overload_for(rt::DType d, int r) const {
  for (const Overload& o : overloads)
    if (o.template_params.empty() && o.serves(d, r)) return o;
  for (const Overload& o : overloads)
    if (o.serves(d, r)) return o;
  internal_fail("serves(dtype, rank)", __FILE__, __LINE__,
                "no overload of '" + function + "' serves " + rt::dtype_name(d) + " rank " +
                    std::to_string(r));
}

std::string KernelInfo::callee(rt::DType d, int r) const {
  const Overload& o = overload_for(d, r);
  if (o.template_params.empty()) return function;
  std::string out = function + "<";
  for (std::size_t i = 0; i < o.template_params.size(); ++i) {
    if (i > 0) out += ", ";
    out += o.template_params[i] == TemplateParam::DType ? rt::dtype_cpp_type(d) : std::to_string(r);
  }
  return out + ">";
}

namespace {

using clang::dyn_cast;
using clang::isa;

// ---------------------------------------------------------------- messages

const char* role_word(ParamKind kind) {
  switch (kind) {
    case ParamKind::TensorIn: return "input";
    case ParamKind::TensorOut: return "output";
    default: return "argument";
  }
}

bool is_tensor(ParamKind kind) { return kind == ParamKind::TensorIn || kind == ParamKind::TensorOut; }

// "float (f32)"
std::string dtype_words(rt::DType d) {
  return std::string(rt::dtype_cpp_type(d)) + " (" + rt::dtype_name(d) + ")";
}

std::string join(const std::vector<std::string>& items, const char* sep = ", ") {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
  return out;
}

std::string dtype_list(const std::vector<rt::DType>& ds) {
  std::vector<std::string> items;
  for (rt::DType d : ds) items.push_back(dtype_words(d));
  return join(items);
}

std::string rank_list(const std::vector<int>& rs) {
  std::vector<std::string> items;
  for (int r : rs) items.push_back(std::to_string(r));
  return join(items);
}

std::string lower_first(std::string s) {
  if (!s.empty() && s[0] >= 'A' && s[0] <= 'Z') s[0] = static_cast<char>(s[0] - 'A' + 'a');
  return s;
}

// What a parameter of `kind` should look like, in the kernel's own spelling
// of the element type and rank ("T"/"float", "R"/"2").
std::string expected_spelling(ParamKind kind, const std::string& elem, const std::string& rank,
                              const std::string& dtype_param) {
  switch (kind) {
    case ParamKind::TensorIn: return "View<const " + elem + ", " + rank + ">";
    case ParamKind::TensorOut: return "View<" + elem + ", " + rank + ">";
    case ParamKind::Int: return "an integer type";
    case ParamKind::Float: return dtype_param.empty() ? "float or double" : "float, double or " + dtype_param;
    case ParamKind::Bool: return "bool";
    case ParamKind::Ints: return "std::span<const std::int64_t> or const std::vector<std::int64_t>&";
    case ParamKind::Floats: return "std::span<const double> or const std::vector<double>&";
  }
  return "?";
}

// ------------------------------------------------------- clang locations

// Converts clang source positions to wfgen diagnostics. The main file is
// shown as the caller named it; included files by their presumed name.
class Locator {
 public:
  Locator(const clang::SourceManager& sm, const clang::LangOptions& lo, std::string main_name)
      : sm_(sm), lo_(lo), main_name_(std::move(main_name)) {}

  // A diagnostic whose caret starts at `begin` and underlines through the
  // token at `last` (when on the same line).
  Diagnostic at(clang::SourceLocation begin, clang::SourceLocation last, std::string message) const {
    Diagnostic d;
    d.message = std::move(message);
    if (begin.isInvalid()) return d;
    clang::SourceLocation b = sm_.getExpansionLoc(begin);
    clang::FileID fid = sm_.getFileID(b);
    d.loc.file = sm_.isInMainFile(b) ? main_name_ : presumed_name(b);
    d.loc.line = static_cast<int>(sm_.getExpansionLineNumber(b));
    d.loc.col = static_cast<int>(sm_.getExpansionColumnNumber(b));
    bool invalid = false;
    llvm::StringRef buffer = sm_.getBufferData(fid, &invalid);
    if (!invalid) d.source_line = line_of(std::string_view(buffer.data(), buffer.size()), d.loc.line);
    d.length = 1;
    if (last.isValid()) {
      clang::SourceLocation e = clang::Lexer::getLocForEndOfToken(sm_.getExpansionLoc(last), 0, sm_, lo_);
      if (e.isValid() && sm_.getFileID(e) == fid &&
          static_cast<int>(sm_.getExpansionLineNumber(e)) == d.loc.line) {
        d.length = std::max(1, static_cast<int>(sm_.getExpansionColumnNumber(e)) - d.loc.col);
      } else {
        d.length = std::max(1, static_cast<int>(d.source_line.size()) - d.loc.col + 1);
      }
    }
    return d;
  }

  // The source text of `range`, whitespace runs folded to one space.
  std::string text(clang::CharSourceRange range) const {
    if (range.getBegin().isInvalid() || range.getEnd().isInvalid() || range.getBegin().isMacroID() ||
        range.getEnd().isMacroID())
      return {};
    bool invalid = false;
    llvm::StringRef raw = clang::Lexer::getSourceText(range, sm_, lo_, &invalid);
    if (invalid) return {};
    std::string out;
    for (char c : raw) {
      bool space = c == ' ' || c == '\t' || c == '\n' || c == '\r';
      if (space) {
        if (!out.empty() && out.back() != ' ') out += ' ';
      } else {
        out += c;
      }
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out;
  }

  std::string presumed_name(clang::SourceLocation loc) const {
    clang::PresumedLoc p = sm_.getPresumedLoc(sm_.getExpansionLoc(loc));
    return p.isValid() ? p.getFilename() : std::string("<unknown>");
  }

  bool in_main_file(clang::SourceLocation loc) const {
    return loc.isValid() && sm_.isInMainFile(sm_.getExpansionLoc(loc));
  }

 private:
  const clang::SourceManager& sm_;
  const clang::LangOptions& lo_;
  std::string main_name_;
};

// Keeps the first error clang reports (driver or frontend) and prints nothing.
class FirstErrorKeeper : public clang::DiagnosticConsumer {
 public:
  explicit FirstErrorKeeper(std::string main_name) : main_name_(std::move(main_name)) {}

  void HandleDiagnostic(clang::DiagnosticsEngine::Level level, const clang::Diagnostic& info) override {
    clang::DiagnosticConsumer::HandleDiagnostic(level, info);
    if (level < clang::DiagnosticsEngine::Error || first_) return;
    llvm::SmallString<256> text;
    info.FormatDiagnostic(text);
    std::string message = text.str().str();
    if (info.hasSourceManager() && info.getLocation().isValid()) {
      const clang::SourceManager& sm = info.getSourceManager();
      clang::LangOptions lo;
      lo.CPlusPlus = lo.CPlusPlus20 = true;
      Locator locator(sm, lo, main_name_);
      clang::SourceLocation last;
      if (info.getNumRanges() > 0 && info.getRange(0).isTokenRange() &&
          sm.getExpansionLoc(info.getRange(0).getBegin()) == sm.getExpansionLoc(info.getLocation()))
        last = info.getRange(0).getEnd();
      first_ = locator.at(info.getLocation(), last, message);
    } else {
      first_ = Diagnostic{};
      first_->message = message;
    }
  }

  const std::optional<Diagnostic>& first() const { return first_; }

 private:
  std::string main_name_;
  std::optional<Diagnostic> first_;
};

// -------------------------------------------------------------- the check

// A View parameter type taken apart. Element and rank are each either a
// concrete value, the kernel's template parameter, or unsupported.
struct ViewType {
  bool elem_const = false;
  bool elem_is_param = false;          // T
  std::optional<rt::DType> elem;       // float, ...
  std::string elem_spelling;           // "float", "T", "long long"
  bool rank_is_param = false;          // R
  std::optional<int> rank;             // 2
  std::string rank_spelling;           // "2", "R", "R + 1"
};

struct Candidate {
  clang::FunctionDecl* fd = nullptr;
  clang::FunctionTemplateDecl* ftd = nullptr;  // null: not a template
};

struct Outcome {
  KernelInfo info;
  std::vector<Diagnostic> errors;
};

class Checker {
 public:
  Checker(clang::ASTContext& ctx, const Expectation& expect, const std::string& main_name)
      : ctx_(ctx),
        sm_(ctx.getSourceManager()),
        expect_(expect),
        main_name_(main_name),
        loc_(ctx.getSourceManager(), ctx.getLangOpts(), main_name) {
    policy_ = std::make_unique<clang::PrintingPolicy>(ctx.getLangOpts());
    policy_->SuppressUnwrittenScope = true;
    policy_->SuppressInlineNamespace = true;
    policy_->SuppressTagKeyword = true;
  }

  Outcome run() {
    collect(ctx_.getTranslationUnitDecl());
    Outcome out;
    out.info.file = main_name_;
    if (candidates_.empty()) {
      out.errors.push_back(not_found());
      return out;
    }
    std::set<std::string> qualified;
    for (const Candidate& c : candidates_) qualified.insert(qualified_name(c.fd));
    if (qualified.size() > 1) {
      Diagnostic d = spec_diag("function name '" + expect_.function + "' is ambiguous in kernel file '" +
                               main_name_ + "': " + join({qualified.begin(), qualified.end()}) +
                               "; name one of them qualified");
      out.errors.push_back(d);
      return out;
    }
    out.info.function = *qualified.begin();
    for (const Candidate& c : candidates_) {
      std::optional<Overload> o = check(c, out.errors);
      if (!o) continue;
      bool dtype_t = false, rank_t = false;
      for (TemplateParam p : o->template_params) (p == TemplateParam::DType ? dtype_t : rank_t) = true;
      out.info.dtype_template |= dtype_t;
      out.info.rank_template |= rank_t;
      out.info.overloads.push_back(std::move(*o));
    }
    out.info.loc = fn_diag(candidates_.front().fd, "").loc;
    if (out.errors.empty()) check_coverage(out.info, out.errors);
    return out;
  }

 private:
  // ---- finding the function

  std::string qualified_name(const clang::NamedDecl* d) const {
    std::string s;
    llvm::raw_string_ostream os(s);
    d->printQualifiedName(os, *policy_);
    return os.str();
  }

  bool name_matches(const clang::FunctionDecl* fd) const {
    std::string want = expect_.function;
    if (want.rfind("::", 0) == 0) want = want.substr(2);
    if (want.find("::") == std::string::npos) return fd->getName() == want;
    return qualified_name(fd) == want;
  }

  void collect(clang::DeclContext* dc) {
    for (clang::Decl* d : dc->decls()) {
      if (auto* ns = dyn_cast<clang::NamespaceDecl>(d)) {
        collect(ns);
        continue;
      }
      if (auto* ls = dyn_cast<clang::LinkageSpecDecl>(d)) {
        collect(ls);
        continue;
      }
      auto* ftd = dyn_cast<clang::FunctionTemplateDecl>(d);
      auto* fd = ftd ? ftd->getTemplatedDecl() : dyn_cast<clang::FunctionDecl>(d);
      if (!fd || isa<clang::CXXMethodDecl>(fd) || !fd->getDeclName().isIdentifier() || fd->isDeleted()) continue;
      if (!ftd && fd->getTemplatedKind() != clang::FunctionDecl::TK_NonTemplate) continue;
      bool main = loc_.in_main_file(fd->getLocation());
      if (main) names_.insert(qualified_name(fd));
      if (!name_matches(fd)) continue;
      if (!main) {
        if (elsewhere_.empty()) elsewhere_ = loc_.presumed_name(fd->getLocation());
        continue;
      }
      // One entry per entity; the definition wins over declarations.
      const clang::Decl* key = ftd ? static_cast<const clang::Decl*>(ftd->getCanonicalDecl())
                                   : fd->getCanonicalDecl();
      auto [it, fresh] = index_.emplace(key, candidates_.size());
      if (fresh) {
        candidates_.push_back({fd, ftd});
      } else if (fd->isThisDeclarationADefinition()) {
        candidates_[it->second] = {fd, ftd};
      }
    }
  }

  Diagnostic spec_diag(std::string message) const {
    Diagnostic d;
    d.loc = expect_.spec_loc;
    d.message = std::move(message);
    return d;
  }

  Diagnostic not_found() const {
    if (!elsewhere_.empty()) {
      return spec_diag("function '" + expect_.function + "' is not in kernel file '" + main_name_ +
                       "' but in '" + elsewhere_ + "', which it includes; name that file in the spec");
    }
    std::vector<std::string> names(names_.begin(), names_.end());
    Diagnostic d = spec_diag("no function '" + expect_.function + "' in kernel file '" + main_name_ + "'" +
                             did_you_mean(expect_.function, names));
    if (names.empty()) {
      d.detail = "note: the file defines no free functions";
    } else {
      if (names.size() > 12) names.resize(12), names.push_back("...");
      d.detail = "note: functions in the file: " + join(names);
    }
    return d;
  }

  // ---- diagnostics at C++ entities

  std::string fn_name(const clang::FunctionDecl* fd) const { return "'" + qualified_name(fd) + "'"; }

  Diagnostic fn_diag(const clang::FunctionDecl* fd, std::string message) const {
    return loc_.at(fd->getLocation(), fd->getLocation(), std::move(message));
  }

  // "parameter 'a'" or "parameter 2" when unnamed.
  static std::string param_word(const clang::ParmVarDecl* p, std::size_t index) {
    if (p->getIdentifier()) return "parameter '" + p->getName().str() + "'";
    return "parameter " + std::to_string(index + 1);
  }

  // The parameter's type as written, e.g. "const View<float, 2>&".
  std::string written_type(const clang::ParmVarDecl* p) const {
    std::string s;
    if (p->getIdentifier()) {
      s = loc_.text(clang::CharSourceRange::getCharRange(p->getBeginLoc(), p->getLocation()));
    } else {
      s = loc_.text(clang::CharSourceRange::getTokenRange(p->getBeginLoc(), p->getEndLoc()));
    }
    if (s.empty()) s = p->getType().getAsString(*policy_);
    return s;
  }

  Diagnostic param_diag(const clang::ParmVarDecl* p, std::string message) const {
    clang::SourceLocation last = p->getIdentifier() ? p->getLocation() : p->getEndLoc();
    return loc_.at(p->getBeginLoc(), last, std::move(message));
  }

  // ---- types

  std::optional<rt::DType> dtype_of(clang::QualType t) const {
    clang::QualType c = t.getCanonicalType().getUnqualifiedType();
    if (c == ctx_.FloatTy) return rt::DType::f32;
    if (c == ctx_.DoubleTy) return rt::DType::f64;
    if (c == ctx_.getCanonicalType(ctx_.getIntTypeForBitwidth(32, true))) return rt::DType::i32;
    if (c == ctx_.getCanonicalType(ctx_.getIntTypeForBitwidth(64, true))) return rt::DType::i64;
    if (c == ctx_.UnsignedCharTy) return rt::DType::u8;
    return std::nullopt;
  }

  static bool is_view_template(const clang::TemplateDecl* td) {
    if (!td || td->getName() != "View") return false;
    const auto* ns = dyn_cast<clang::NamespaceDecl>(td->getDeclContext());
    if (!ns || ns->getName() != "rt") return false;
    const auto* outer = dyn_cast<clang::NamespaceDecl>(ns->getDeclContext());
    return outer && outer->getName() == "wfgen" && outer->getDeclContext()->isTranslationUnit();
  }

  // `t` without reference and top-level qualifiers.
  std::optional<ViewType> as_view(clang::QualType t) const {
    clang::ArrayRef<clang::TemplateArgument> args;
    if (const auto* rd = t->getAsCXXRecordDecl()) {
      const auto* spec = dyn_cast<clang::ClassTemplateSpecializationDecl>(rd);
      if (!spec || !is_view_template(spec->getSpecializedTemplate())) return std::nullopt;
      args = spec->getTemplateArgs().asArray();
    } else if (const auto* tst = t->getAs<clang::TemplateSpecializationType>()) {
      while (tst->isTypeAlias()) {
        const auto* next = tst->getAliasedType()->getAs<clang::TemplateSpecializationType>();
        if (!next) return std::nullopt;
        tst = next;
      }
      if (!is_view_template(tst->getTemplateName().getAsTemplateDecl())) return std::nullopt;
      args = tst->template_arguments();
    } else {
      return std::nullopt;
    }
    if (args.size() != 2 || args[0].getKind() != clang::TemplateArgument::Type) return std::nullopt;
    ViewType v;
    clang::QualType elem = args[0].getAsType();
    v.elem_const = elem.isConstQualified();
    clang::QualType bare = elem.getUnqualifiedType();
    if (bare->getAs<clang::TemplateTypeParmType>()) {
      v.elem_is_param = true;
    } else {
      v.elem = dtype_of(bare);
    }
    v.elem_spelling = bare.getAsString(*policy_);
    const clang::TemplateArgument& r = args[1];
    if (r.getKind() == clang::TemplateArgument::Integral) {
      v.rank = static_cast<int>(r.getAsIntegral().getExtValue());
      v.rank_spelling = std::to_string(*v.rank);
    } else if (r.getKind() == clang::TemplateArgument::Expression) {
      const clang::Expr* e = r.getAsExpr()->IgnoreImpCasts();
      // Through alias templates the rank is a substituted template parameter.
      while (const auto* sub = dyn_cast<clang::SubstNonTypeTemplateParmExpr>(e))
        e = sub->getReplacement()->IgnoreImpCasts();
      std::string s;
      llvm::raw_string_ostream os(s);
      e->printPretty(os, nullptr, *policy_);
      v.rank_spelling = os.str();
      clang::Expr::EvalResult value;
      if (const auto* ref = dyn_cast<clang::DeclRefExpr>(e);
          ref && isa<clang::NonTypeTemplateParmDecl>(ref->getDecl())) {
        v.rank_is_param = true;
      } else if (!e->isValueDependent() && e->EvaluateAsInt(value, ctx_)) {
        v.rank = static_cast<int>(value.Val.getInt().getExtValue());
        v.rank_spelling = std::to_string(*v.rank);
      }
    }
    return v;
  }

  // std::span<const E> (dynamic extent) or std::vector<E>, E = int64 / double.
  bool is_list_of(clang::QualType t, bool integers) const {
    const auto* rd = t->getAsCXXRecordDecl();
    const auto* spec = rd ? dyn_cast<clang::ClassTemplateSpecializationDecl>(rd) : nullptr;
    if (!spec || !spec->isInStdNamespace()) return false;
    const auto& args = spec->getTemplateArgs();
    if (args.size() < 1 || args[0].getKind() != clang::TemplateArgument::Type) return false;
    clang::QualType elem = args[0].getAsType();
    std::optional<rt::DType> d = dtype_of(elem);
    bool elem_ok = d == (integers ? rt::DType::i64 : rt::DType::f64);
    if (spec->getName() == "span") {
      bool dynamic = args.size() == 2 && args[1].getKind() == clang::TemplateArgument::Integral &&
                     args[1].getAsIntegral().isMaxValue();
      return elem_ok && elem.isConstQualified() && dynamic;
    }
    if (spec->getName() == "vector") return elem_ok && !elem.isConstQualified();
    return false;
  }

  // ---- one overload

  struct Shared {  // the first tensor that fixed the kernel's dtype / rank
    const clang::ParmVarDecl* dtype_from = nullptr;
    std::string dtype_spelling;
    bool dtype_param = false;
    std::optional<rt::DType> dtype;
    const clang::ParmVarDecl* rank_from = nullptr;
    std::string rank_spelling;
    bool rank_param = false;
    std::optional<int> rank;
  };

  std::optional<Overload> check(const Candidate& c, std::vector<Diagnostic>& errors) {
    const std::size_t errors_before = errors.size();
    clang::FunctionDecl* fd = c.fd;
    Overload o;
    o.loc = fn_diag(fd, "").loc;
    const clang::NamedDecl* dtype_param = nullptr;
    const clang::NamedDecl* rank_param = nullptr;
    if (c.ftd) {
      for (const clang::NamedDecl* p : *c.ftd->getTemplateParameters()) {
        const auto* tp = dyn_cast<clang::TemplateTypeParmDecl>(p);
        const auto* np = dyn_cast<clang::NonTypeTemplateParmDecl>(p);
        if (tp && !tp->isParameterPack() && !dtype_param) {
          dtype_param = p;
          o.template_params.push_back(TemplateParam::DType);
        } else if (np && !np->isParameterPack() && np->getType()->isIntegralType(ctx_) && !rank_param) {
          rank_param = p;
          o.template_params.push_back(TemplateParam::Rank);
        } else {
          std::string name = p->getIdentifier() ? "'" + p->getName().str() + "' " : "";
          errors.push_back(loc_.at(p->getBeginLoc(), p->getLocation(),
                                   "template parameter " + name + "of " + fn_name(fd) +
                                       " is not supported; a kernel template has at most one type "
                                       "parameter (the dtype) and one integer parameter (the rank)"));
        }
      }
    }

    clang::QualType ret = fd->getReturnType();
    if (!ret->isVoidType()) {
      clang::SourceRange r = fd->getReturnTypeSourceRange();
      errors.push_back(loc_.at(r.getBegin(), r.getEnd(),
                               "function " + fn_name(fd) + " returns '" + ret.getAsString(*policy_) +
                                   "', expected 'void'; kernels write their results through View<T, R> "
                                   "parameters"));
    }

    // How messages spell the expected element type and rank: the template
    // parameter, the one value the implementation asks for, or T / R.
    const std::string t_name = dtype_param ? dtype_param->getName().str() : "";
    const std::string elem_word = dtype_param                  ? t_name
                                  : expect_.dtypes.size() == 1 ? rt::dtype_cpp_type(expect_.dtypes[0])
                                                               : "T";
    const std::string rank_word = rank_param                  ? rank_param->getName().str()
                                  : expect_.ranks.size() == 1 ? std::to_string(expect_.ranks[0])
                                                              : "R";
    const std::size_t n = fd->getNumParams();
    if (n != expect_.params.size() || fd->isVariadic()) {
      std::vector<std::string> want;
      for (const ExpectedParam& e : expect_.params)
        want.push_back(e.name + " (" + expected_spelling(e.kind, elem_word, rank_word, t_name) + ")");
      std::string what = std::to_string(expect_.params.size()) + " parameter" +
                         (expect_.params.size() == 1 ? "" : "s");
      std::string message = "function " + fn_name(fd) + " has " + std::to_string(n) + " parameter" + (n == 1 ? "" : "s") +
                            (fd->isVariadic() ? " and '...'" : "") + ", expected " + what +
                            (want.empty() ? "" : ": " + join(want));
      if (n > expect_.params.size()) {
        errors.push_back(param_diag(fd->getParamDecl(expect_.params.size()), message));
      } else {
        errors.push_back(fn_diag(fd, message));
      }
      return std::nullopt;
    }

    Shared shared;
    for (std::size_t i = 0; i < n; ++i)
      check_param(fd, i, expect_.params[i], elem_word, rank_word, t_name, shared, errors);

    if (dtype_param && !shared.dtype_param) {
      errors.push_back(loc_.at(dtype_param->getBeginLoc(), dtype_param->getLocation(),
                               "template parameter '" + elem_word + "' of " + fn_name(fd) +
                                   " is not the element type of any view parameter"));
    }
    if (rank_param && !shared.rank_param) {
      errors.push_back(loc_.at(rank_param->getBeginLoc(), rank_param->getLocation(),
                               "template parameter '" + rank_word + "' of " + fn_name(fd) +
                                   " is not the rank of any view parameter"));
    }
    if (errors.size() != errors_before) return std::nullopt;
    o.dtype = shared.dtype;
    o.rank = shared.rank;
    return o;
  }

  void check_param(const clang::FunctionDecl* fd, std::size_t i, const ExpectedParam& e,
                   const std::string& elem_word, const std::string& rank_word, const std::string& t_name,
                   Shared& shared,
                   std::vector<Diagnostic>& errors) {
    const clang::ParmVarDecl* p = fd->getParamDecl(i);
    const std::string who = param_word(p, i) + " of " + fn_name(fd);
    const std::string role = std::string(role_word(e.kind)) + " '" + e.name + "'";
    const std::string found = written_type(p);
    clang::QualType t = p->getType();

    auto fail = [&](std::string message) { errors.push_back(param_diag(p, std::move(message))); };

    if (t->isRValueReferenceType() || (t->isLValueReferenceType() && !t.getNonReferenceType().isConstQualified())) {
      fail(who + " is '" + found + "', a " + (t->isRValueReferenceType() ? "rvalue" : "non-const") +
           " reference; take the " + role + " by value or by const reference");
      return;
    }
    clang::QualType bare = t.getNonReferenceType().getUnqualifiedType();

    if (is_tensor(e.kind)) {
      std::string elem_exp = e.fixed_dtype ? rt::dtype_cpp_type(*e.fixed_dtype) : elem_word;
      std::string rank_exp = e.fixed_rank ? std::to_string(*e.fixed_rank) : rank_word;
      std::optional<ViewType> v = as_view(bare);
      if (!v) {
        fail(who + " has type '" + found + "', expected '" + expected_spelling(e.kind, elem_exp, rank_exp, t_name) +
             "' for " + role);
        return;
      }
      if (!v->elem_is_param && !v->elem) {
        fail(who + " is '" + found + "' with element type '" + v->elem_spelling +
             "', which is not a dtype; expected float, double, std::int32_t, std::int64_t, "
             "std::uint8_t or a template parameter");
        return;
      }
      if (!v->rank_is_param && !v->rank) {
        fail(who + " is '" + found + "' with rank '" + v->rank_spelling +
             "'; expected an integer or the template parameter of the rank");
        return;
      }
      std::string elem_now = v->elem_is_param ? v->elem_spelling : rt::dtype_cpp_type(*v->elem);
      std::string rank_now = v->rank_is_param ? v->rank_spelling : std::to_string(*v->rank);
      if (e.kind == ParamKind::TensorIn && !v->elem_const) {
        fail(who + " is '" + found + "', a writable view, but " + role +
             " is not written by the kernel; expected 'View<const " + elem_now + ", " + rank_now + ">'");
        return;
      }
      if (e.kind == ParamKind::TensorOut && v->elem_const) {
        fail(who + " is '" + found + "', a read-only view, but " + role +
             " is written by the kernel; expected 'View<" + elem_now + ", " + rank_now + ">'");
        return;
      }
      // Element type: a fixed dtype, or the kernel's one shared by all tensors.
      if (e.fixed_dtype) {
        if (v->elem != e.fixed_dtype) {
          fail(who + " is '" + found + "', expected element type " + dtype_words(*e.fixed_dtype) + " for " +
               role);
          return;
        }
      } else if (!shared.dtype_from) {
        shared.dtype_from = p;
        shared.dtype_param = v->elem_is_param;
        shared.dtype = v->elem;
        shared.dtype_spelling = elem_now;
        shared_dtype_role_[fd] = {i, role};
      } else if (shared.dtype_param != v->elem_is_param || shared.dtype != v->elem) {
        fail(who + " has element type '" + elem_now + "' but parameter '" + shared.dtype_from->getName().str() +
             "' has '" + shared.dtype_spelling + "'; all views of a kernel share one dtype");
        return;
      }
      if (e.fixed_rank) {
        if (v->rank != e.fixed_rank) {
          fail(who + " is '" + found + "' of rank " + rank_now + ", expected rank " +
               std::to_string(*e.fixed_rank) + " for " + role);
          return;
        }
      } else if (!shared.rank_from) {
        shared.rank_from = p;
        shared.rank_param = v->rank_is_param;
        shared.rank = v->rank;
        shared.rank_spelling = rank_now;
        shared_rank_role_[fd] = {i, role};
      } else if (shared.rank_param != v->rank_is_param || shared.rank != v->rank) {
        fail(who + " has rank " + rank_now + " but parameter '" + shared.rank_from->getName().str() + "' has rank " +
             shared.rank_spelling + "; all views of a kernel share one rank");
        return;
      }
      return;
    }

    // Scalars and lists.
    const auto* bt = bare->getAs<clang::BuiltinType>();
    bool ok = false;
    switch (e.kind) {
      case ParamKind::Int:
        ok = bt && bt->isInteger() && bt->getKind() != clang::BuiltinType::Bool;
        break;
      case ParamKind::Float:
        ok = (bt && (bt->getKind() == clang::BuiltinType::Float || bt->getKind() == clang::BuiltinType::Double)) ||
             bare->getAs<clang::TemplateTypeParmType>() != nullptr;
        break;
      case ParamKind::Bool:
        ok = bt && bt->getKind() == clang::BuiltinType::Bool;
        break;
      case ParamKind::Ints:
      case ParamKind::Floats:
        ok = is_list_of(bare, e.kind == ParamKind::Ints);
        break;
      default:
        break;
    }
    if (!ok) {
      fail(who + " has type '" + found + "', expected " + expected_spelling(e.kind, elem_word, rank_word, t_name) +
           " for " + role);
    }
  }

  // ---- every (dtype, rank) of the implementation is served

  void check_coverage(const KernelInfo& info, std::vector<Diagnostic>& errors) {
    std::vector<std::optional<rt::DType>> ds(expect_.dtypes.begin(), expect_.dtypes.end());
    std::vector<std::optional<int>> rs(expect_.ranks.begin(), expect_.ranks.end());
    if (ds.empty()) ds.push_back(std::nullopt);
    if (rs.empty()) rs.push_back(std::nullopt);
    auto served = [&](std::optional<rt::DType> d, std::optional<int> r) {
      for (const Overload& o : info.overloads)
        if ((!d || !o.dtype || *o.dtype == *d) && (!r || !o.rank || *o.rank == *r)) return true;
      return false;
    };
    std::vector<std::string> missing;
    for (auto d : ds)
      for (auto r : rs)
        if (!served(d, r)) {
          std::string s = d ? std::string(rt::dtype_name(*d)) : std::string();
          if (r) s += (s.empty() ? "" : " ") + std::string("rank ") + std::to_string(*r);
          missing.push_back(s);
        }
    if (missing.empty()) return;

    if (candidates_.size() == 1) {
      const clang::FunctionDecl* fd = candidates_.front().fd;
      const Overload& o = info.overloads.front();
      bool d_in = !o.dtype || expect_.dtypes.empty() ||
                  std::find(expect_.dtypes.begin(), expect_.dtypes.end(), *o.dtype) != expect_.dtypes.end();
      bool r_in = !o.rank || expect_.ranks.empty() ||
                  std::find(expect_.ranks.begin(), expect_.ranks.end(), *o.rank) != expect_.ranks.end();
      const std::string expected_d = expect_.dtypes.size() == 1 ? "expected element type " + dtype_list(expect_.dtypes)
                                                                 : "expected one of " + dtype_list(expect_.dtypes);
      const std::string expected_r = expect_.ranks.size() == 1 ? "expected rank " + rank_list(expect_.ranks)
                                                                : "expected one of ranks " + rank_list(expect_.ranks);
      if (!d_in) {
        auto [i, role] = shared_dtype_role_.at(fd);
        const clang::ParmVarDecl* p = fd->getParamDecl(i);
        errors.push_back(param_diag(p, param_word(p, i) + " of " + fn_name(fd) + " is '" + written_type(p) + "', " +
                                           expected_d + " for " + role));
      }
      if (!r_in) {
        auto [i, role] = shared_rank_role_.at(fd);
        const clang::ParmVarDecl* p = fd->getParamDecl(i);
        errors.push_back(param_diag(p, param_word(p, i) + " of " + fn_name(fd) + " is '" + written_type(p) +
                                           "' of rank " + std::to_string(*o.rank) + ", " + expected_r + " for " +
                                           role));
      }
      if (!d_in || !r_in) return;
      if (o.dtype && expect_.dtypes.size() > 1) {
        errors.push_back(fn_diag(fd, "function " + fn_name(fd) + " serves only " + dtype_words(*o.dtype) +
                                         " but the implementation lists dtypes " + dtype_list(expect_.dtypes) +
                                         "; make the element type a template parameter or add an overload "
                                         "per dtype"));
      }
      if (o.rank && expect_.ranks.size() > 1) {
        errors.push_back(fn_diag(fd, "function " + fn_name(fd) + " serves only rank " + std::to_string(*o.rank) +
                                         " but the implementation lists ranks " + rank_list(expect_.ranks) +
                                         "; make the rank a template parameter or add an overload per rank"));
      }
      return;
    }

    Diagnostic d = fn_diag(candidates_.front().fd, "no overload of " + fn_name(candidates_.front().fd) +
                                                       " serves " + join(missing));
    std::vector<std::string> have;
    for (const Overload& o : info.overloads) {
      std::string s = o.dtype ? rt::dtype_name(*o.dtype) : "any dtype";
      s += o.rank ? " rank " + std::to_string(*o.rank) : " any rank";
      have.push_back(s + " at " + o.loc.str());
    }
    d.detail = "note: overloads found: " + join(have, "; ");
    errors.push_back(d);
  }

  clang::ASTContext& ctx_;
  const clang::SourceManager& sm_;
  const Expectation& expect_;
  std::string main_name_;
  Locator loc_;
  std::unique_ptr<clang::PrintingPolicy> policy_;
  std::vector<Candidate> candidates_;
  std::map<const clang::Decl*, std::size_t> index_;
  std::set<std::string> names_;
  std::string elsewhere_;
  std::map<const clang::FunctionDecl*, std::pair<std::size_t, std::string>> shared_dtype_role_;
  std::map<const clang::FunctionDecl*, std::pair<std::size_t, std::string>> shared_rank_role_;
};

// ------------------------------------------------------- the invocation

struct RunState {
  const Expectation* expect = nullptr;
  std::string main_name;
  bool checked = false;
  Outcome outcome;
  std::exception_ptr failure;
};

class Consumer : public clang::ASTConsumer {
 public:
  Consumer(clang::CompilerInstance& ci, RunState& state) : ci_(ci), state_(state) {}

  // Bodies outside the kernel file are not needed (nor checked).
  bool shouldSkipFunctionBody(clang::Decl* d) override {
    const clang::SourceManager& sm = ci_.getSourceManager();
    clang::SourceLocation loc = d->getLocation();
    return loc.isValid() && !sm.isInMainFile(sm.getExpansionLoc(loc));
  }

  void HandleTranslationUnit(clang::ASTContext& ctx) override {
    if (ctx.getDiagnostics().hasErrorOccurred()) return;
    try {
      Checker checker(ctx, *state_.expect, state_.main_name);
      state_.outcome = checker.run();
      state_.checked = true;
    } catch (...) {
      state_.failure = std::current_exception();
    }
  }

 private:
  clang::CompilerInstance& ci_;
  RunState& state_;
};

class Action : public clang::ASTFrontendAction {
 public:
  explicit Action(RunState& state) : state_(state) {}
  std::unique_ptr<clang::ASTConsumer> CreateASTConsumer(clang::CompilerInstance& ci, llvm::StringRef) override {
    ci.getFrontendOpts().SkipFunctionBodies = true;  // consulted per body through shouldSkipFunctionBody
    return std::make_unique<Consumer>(ci, state_);
  }

 private:
  RunState& state_;
};

Diagnostic at_spec(const Expectation& e, std::string message) {
  Diagnostic d;
  d.loc = e.spec_loc;
  d.message = std::move(message);
  return d;
}

}  // namespace

KernelInfo resolve(const std::filesystem::path& file, const Expectation& expect,
                   const std::vector<std::string>& extra_args) {
  namespace fs = std::filesystem;
  const std::string name = file.string();
  std::error_code ec;
  fs::file_status st = fs::status(file, ec);
  if (!fs::exists(st)) throw UserError(at_spec(expect, "cannot read kernel file '" + name + "': no such file"));
  if (fs::is_directory(st)) throw UserError(at_spec(expect, "kernel file '" + name + "' is a directory"));
  {
    std::ifstream in(file);
    if (!in) {
      throw UserError(at_spec(expect, "cannot read kernel file '" + name + "': " + lower_first(std::strerror(errno))));
    }
  }

  // -fno-caret-diagnostics: clang prints "N errors generated." otherwise.
  std::vector<std::string> argv = {"clang",
                                   "-fsyntax-only",
                                   "-fno-caret-diagnostics",
                                   "-std=c++20",
                                   "-resource-dir",
                                   WFGEN_CLANG_RESOURCE_DIR,
                                   "-I" + runtime_include_dir()};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  argv.insert(argv.end(), {"-x", "c++", name});

  RunState state;
  state.expect = &expect;
  state.main_name = name;
  FirstErrorKeeper errors(name);
  llvm::IntrusiveRefCntPtr<clang::FileManager> files(new clang::FileManager(clang::FileSystemOptions()));
  clang::tooling::ToolInvocation invocation(argv, std::make_unique<Action>(state), files.get());
  invocation.setDiagnosticConsumer(&errors);
  bool ran = invocation.run();

  if (state.failure) std::rethrow_exception(state.failure);
  if (errors.first() || !ran || !state.checked) {
    Diagnostic first = errors.first() ? *errors.first() : Diagnostic{};
    if (!errors.first()) first.message = "clang could not read the file";
    if (!first.loc.known()) {
      first.loc = expect.spec_loc;
      first.message = "in kernel file '" + name + "': " + first.message;
    }
    Diagnostic note = at_spec(expect, "while reading kernel file '" + name + "' for function '" +
                                          expect.function + "'");
    note.severity = Diagnostic::Severity::Note;
    if (first.loc.file == expect.spec_loc.file && first.loc.line == expect.spec_loc.line) throw UserError(first);
    throw UserError(std::vector<Diagnostic>{first, note});
  }
  if (!state.outcome.errors.empty()) throw UserError(state.outcome.errors);
  return state.outcome.info;
}

}  // namespace wfgen::cppkernel
