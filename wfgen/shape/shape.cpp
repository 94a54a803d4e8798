#include "wfgen/shape/shape.hpp"

#include <algorithm>
#include <charconv>
#include <functional>
#include <set>
#include <sstream>
#include <stdexcept>

namespace wfgen::shape {

// ---------------------------------------------------------------------------
// Dim

struct Dim::Node {
  std::string name;  // a symbol when op == 0
  char op = 0;       // + - * / for a binary expression
  Dim lhs, rhs;
  std::size_t size = 1;  // nodes in the expression, counting shared ones each time
};

Dim::Dim(std::int64_t value) : value_(value) {}

Dim Dim::symbol(std::string name) {
  Dim d;
  auto n = std::make_shared<Node>();
  n->name = std::move(name);
  d.node_ = std::move(n);
  return d;
}

namespace {

std::int64_t checked(char op, std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  switch (op) {
    case '+':
      if (__builtin_add_overflow(a, b, &r)) throw std::overflow_error("integer overflow in " + std::to_string(a) + " + " + std::to_string(b));
      return r;
    case '-':
      if (__builtin_sub_overflow(a, b, &r)) throw std::overflow_error("integer overflow in " + std::to_string(a) + " - " + std::to_string(b));
      return r;
    case '*':
      if (__builtin_mul_overflow(a, b, &r)) throw std::overflow_error("integer overflow in " + std::to_string(a) + " * " + std::to_string(b));
      return r;
    case '/': {
      if (b == 0) throw std::domain_error("division by zero in " + std::to_string(a) + " / 0");
      if (a == INT64_MIN && b == -1) throw std::overflow_error("integer overflow in " + std::to_string(a) + " / -1");
      std::int64_t q = a / b;
      if ((a % b != 0) && ((a < 0) != (b < 0))) --q;  // floor division, as Lisp's floor
      return q;
    }
  }
  throw std::logic_error("unknown operator");
}

}  // namespace

Dim Dim::binary(char op, const Dim& lhs, const Dim& rhs) {
  if (lhs.is_known() && rhs.is_known()) return Dim(checked(op, lhs.value(), rhs.value()));
  // Constants go right and are merged, so symbolic shapes stay short:
  // 1 + (h + -2 + -1) is h - 2, 2 * (n * 3) is n * 6.
  if ((op == '+' || op == '*') && lhs.is_known()) return binary(op, rhs, lhs);
  if ((op == '+' || op == '-') && rhs.is_known()) {
    std::int64_t c = op == '+' ? rhs.value() : checked('-', 0, rhs.value());
    const Node* n = lhs.node_.get();
    if (n->op == '+' || n->op == '-') {
      if (n->rhs.is_known()) {
        std::int64_t inner = n->op == '+' ? n->rhs.value() : checked('-', 0, n->rhs.value());
        return binary('+', n->lhs, Dim(checked('+', inner, c)));
      }
    }
    if (c == 0) return lhs;
    if (c < 0 && c != INT64_MIN) return make_node('-', lhs, Dim(-c));
    return make_node('+', lhs, Dim(c));
  }
  if (op == '*' && rhs.is_known() && lhs.node_->op == '*' && lhs.node_->rhs.is_known()) {
    return binary('*', lhs.node_->lhs, Dim(checked('*', lhs.node_->rhs.value(), rhs.value())));
  }
  // Identities keep symbolic shapes readable: batch * 1 is batch.
  if (rhs.is_known()) {
    if ((op == '+' || op == '-') && rhs.value() == 0) return lhs;
    if ((op == '*' || op == '/') && rhs.value() == 1) return lhs;
    if (op == '*' && rhs.value() == 0) return Dim(0);
  }
  if (lhs.is_known()) {
    if (op == '+' && lhs.value() == 0) return rhs;
    if (op == '*' && lhs.value() == 1) return rhs;
    if ((op == '*' || op == '/') && lhs.value() == 0) return Dim(0);
  }
  return make_node(op, lhs, rhs);
}

// A symbolic expression node. Sizes are bounded: `k2 = k1 * k1`, `k3 = k2 * k2`
// ... would otherwise print (and compare) exponentially long strings.
Dim Dim::make_node(char op, const Dim& lhs, const Dim& rhs) {
  auto size = [](const Dim& d) { return d.is_known() ? std::size_t{1} : d.node_->size; };
  std::size_t total = size(lhs) + size(rhs) + 1;
  if (total > 1000) throw std::overflow_error("symbolic size expression too large (more than 1000 terms)");
  Dim d;
  auto n = std::make_shared<Node>();
  n->op = op;
  n->lhs = lhs;
  n->rhs = rhs;
  n->size = total;
  d.node_ = std::move(n);
  return d;
}

std::vector<std::string> Dim::symbols() const {
  std::vector<std::string> out;
  std::function<void(const Dim&)> walk = [&](const Dim& d) {
    if (d.is_known()) return;
    if (d.node_->op == 0) {
      out.push_back(d.node_->name);
      return;
    }
    walk(d.node_->lhs);
    walk(d.node_->rhs);
  };
  walk(*this);
  return out;
}

std::string Dim::str() const {
  if (is_known()) return std::to_string(value_);
  if (node_->op == 0) return node_->name;
  auto side = [&](const Dim& d, bool right) {
    std::string s = d.str();
    bool compound = !d.is_known() && d.node_->op != 0;
    bool low = compound && (d.node_->op == '+' || d.node_->op == '-');
    bool paren = compound && ((node_->op == '*' || node_->op == '/') ? (low || right) : (right && low));
    return paren ? "(" + s + ")" : s;
  };
  return side(node_->lhs, false) + " " + node_->op + " " + side(node_->rhs, true);
}

Dim Dim::substitute(const std::function<std::optional<Dim>(const std::string&)>& lookup) const {
  if (is_known()) return *this;
  if (node_->op == 0) {
    std::optional<Dim> d = lookup(node_->name);
    return d ? *d : *this;
  }
  return binary(node_->op, node_->lhs.substitute(lookup), node_->rhs.substitute(lookup));
}

bool operator==(const Dim& a, const Dim& b) {
  if (a.is_known() != b.is_known()) return false;
  if (a.is_known()) return a.value() == b.value();
  return a.str() == b.str();
}

std::string shape_str(const Shape& s) {
  std::string out = "(";
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i) out += " ";
    std::string d = s[i].str();
    out += s[i].is_known() || d.find(' ') == std::string::npos ? d : "{" + d + "}";
  }
  return out + ")";
}

std::string shapes_str(const std::vector<Shape>& s) {
  std::string out = "(";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? " " : "") + shape_str(s[i]);
  return out + ")";
}

// ---------------------------------------------------------------------------
// The checker

namespace {

using subscript::Argument;
using subscript::Binding;
using subscript::Declaration;
using subscript::Expr;
using subscript::Subscript;

std::string ordinal(std::size_t n) {
  std::string suffix = "th";
  if (n % 100 < 11 || n % 100 > 13) {
    if (n % 10 == 1) suffix = "st";
    else if (n % 10 == 2) suffix = "nd";
    else if (n % 10 == 3) suffix = "rd";
  }
  return std::to_string(n) + suffix;
}

struct Entry {
  Value value;
  std::string origin;  // "constructor argument", "where k = 3", "the 1st input A[~ i j]"
};

// An evaluation error inside a where expression, at a DSL offset.
struct EvalError {
  std::string message;
  std::size_t offset, length;
};

class Checker {
 public:
  Checker(const Declaration& d, const Args& args, const std::vector<Shape>& inputs)
      : decl_(d), args_(args), inputs_(inputs) {}

  CheckResult run() {
    for (const auto& [name, value] : args_) table_[name] = {value, "constructor argument"};
    for (const auto& in : inputs_) longest_rank_ = std::max(longest_rank_, in.size());
    // ~ that no input uses covers no dims (cl-waffe2 binds it to an empty list).
    if (!decl_.uses_batch_in_inputs()) table_["~"] = {Value::list({}), "no input uses ~"};
    std::vector<const Binding*> deferred;
    for (const auto& b : decl_.where) {
      if (!bind_where(b)) deferred.push_back(&b);
    }
    bool count_ok = check_count();
    if (count_ok) {
      // A binding waiting for input-derived symbols is bound as soon as the
      // inputs read so far determine them, so later inputs are checked
      // against it (`A[i] B[k] -> ... where k = i * 2`).
      for (std::size_t i = 0; i < inputs_.size(); ++i) {
        match_input(i);
        retry(deferred);
      }
    }
    retry(deferred);
    if (count_ok) {
      for (const Binding* b : deferred) report_undetermined_binding(*b);
    }
    predict_outputs(count_ok);
    result_.unified.clear();
    for (const auto& [name, dim] : subst_) {
      Dim r = resolve(dim);
      result_.unified[name] = r;
    }
    if (overflow_) {
      report(Category::Where, "", "Couldn't predict the shapes: " + *overflow_ + " while substituting symbolic dims.");
    }
    return std::move(result_);
  }

 private:
  // --- symbolic unification --------------------------------------------------

  // Binds deferred where clauses until none makes progress; one may enable another.
  void retry(std::vector<const Binding*>& deferred) {
    for (bool progress = true; progress && !deferred.empty();) {
      progress = false;
      for (auto it = deferred.begin(); it != deferred.end();) {
        if (bind_where(**it)) {
          it = deferred.erase(it);
          progress = true;
        } else {
          ++it;
        }
      }
    }
  }

  // `d` with every unified symbol replaced. Folding may overflow once a
  // symbol gets a large size (`n * n`, n = 2^32): then `d` stays symbolic
  // and the overflow is reported once at the end.
  Dim resolve(const Dim& d) const {
    try {
      return d.substitute([this](const std::string& name) -> std::optional<Dim> {
        auto it = subst_.find(name);
        if (it == subst_.end()) return std::nullopt;
        return resolve(it->second);
      });
    } catch (const std::exception& e) {
      if (!overflow_) overflow_ = e.what();
      return d;
    }
  }

  Dim make_binary(char op, const Dim& a, const Dim& b) { return Dim::binary(op, a, b); }

  static bool plain_symbol(const Dim& d) { return !d.is_known() && d.str().find(' ') == std::string::npos; }

  // Makes `expected` and `got` the same dim if they can be; false on a conflict.
  // A symbol is never bound to an expression that contains it (n = n + 1
  // has no solution among sizes): that is a conflict.
  bool unify(const Dim& expected, const Dim& got) {
    Dim a = resolve(expected), b = resolve(got);
    if (a == b) return true;
    auto occurs = [](const Dim& sym, const Dim& in) {
      for (const auto& n : in.symbols())
        if (n == sym.str()) return true;
      return false;
    };
    if (plain_symbol(b) && !occurs(b, a)) {
      subst_[b.str()] = a;
      return true;
    }
    if (plain_symbol(a) && !occurs(a, b)) {
      subst_[a.str()] = b;
      return true;
    }
    return false;
  }

  // "3", or "batch = 3" when a symbolic dim has been unified with a size.
  std::string shown(const Dim& d) const {
    Dim r = resolve(d);
    if (r == d || d.is_known()) return r.str();
    return d.str() + " = " + r.str();
  }

  // For a failed unify(expected, got) where a symbolic dim is involved:
  // "\n Conflict: the symbolic dim batch is 3 and cannot also be 4."
  std::string conflict_note(const Dim& expected, const Dim& got) const {
    Dim a = resolve(expected), b = resolve(got);
    for (const Dim* raw : {&expected, &got}) {
      if (plain_symbol(*raw) && !(resolve(*raw) == *raw)) {
        const Dim& other = raw == &expected ? b : a;
        return "\n Conflict: the symbolic dim " + raw->str() + " is " + resolve(*raw).str() + " and cannot also be " +
               other.str() + ".";
      }
    }
    if (!a.is_known() || !b.is_known()) {
      return "\n Conflict: the symbolic dims " + a.str() + " and " + b.str() + " cannot be proven equal.";
    }
    return "";
  }

  // --- reports ---------------------------------------------------------------

  void report(Category category, std::string symbol, std::string text,
              std::optional<std::size_t> offset = std::nullopt, std::size_t length = 1) {
    result_.reports.push_back({std::move(symbol), std::move(text), offset, length, category});
  }

  // --- where bindings --------------------------------------------------------

  // Evaluates `e`; nullopt when it needs a symbol not determined yet.
  std::optional<Value> eval(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::Integer: return Value::scalar(Dim(e.value));
      case Expr::Kind::Symbol: {
        auto it = table_.find(e.name);
        if (it == table_.end()) return std::nullopt;
        Value v = it->second.value;
        for (auto& d : v.dims) d = resolve(d);
        return v;
      }
      case Expr::Kind::List: {
        Value out;
        out.is_list = true;
        for (const auto& item : e.items) {
          auto v = eval(item);
          if (!v) return std::nullopt;
          out.dims.insert(out.dims.end(), v->dims.begin(), v->dims.end());  // lists splice
        }
        return out;
      }
      case Expr::Kind::Negate: {
        auto v = eval(e.items[0]);
        if (!v) return std::nullopt;
        Dim d = scalar_of(*v, e.items[0]);
        return Value::scalar(arith('-', Dim(0), d, e));
      }
      case Expr::Kind::Binary: {
        auto l = eval(e.items[0]);
        auto r = eval(e.items[1]);
        if (!l || !r) return std::nullopt;
        return Value::scalar(arith(e.op, scalar_of(*l, e.items[0]), scalar_of(*r, e.items[1]), e));
      }
      case Expr::Kind::IfNumber: {
        // x must be determined (the branch is chosen from it); a symbolic
        // size is a number for wfgen, so `then` is taken either way.
        auto x = eval(e.items[0]);
        if (!x) return std::nullopt;
        scalar_of(*x, e.items[0]);
        return eval(e.items[1]);
      }
      case Expr::Kind::Index: {
        auto l = eval(e.items[0]);
        auto r = eval(e.items[1]);
        if (!l || !r) return std::nullopt;
        Dim index = scalar_of(*r, e.items[1]);
        if (!l->is_list) {
          throw EvalError{"cannot index " + e.items[0].str() + " = " + l->str() + ": it is an integer, not a list",
                          e.offset, e.length};
        }
        if (!index.is_known() || index.value() < 0 || index.value() >= static_cast<std::int64_t>(l->dims.size())) {
          throw EvalError{"index " + index.str() + " is out of range for " + e.items[0].str() + " = " + l->str() +
                              " (valid: 0 to " + std::to_string(static_cast<long long>(l->dims.size()) - 1) + ")",
                          e.items[1].offset, e.items[1].length};
        }
        return Value::scalar(l->dims[static_cast<std::size_t>(index.value())]);
      }
    }
    return std::nullopt;
  }

  Dim scalar_of(const Value& v, const Expr& e) {
    if (v.is_list || v.dims.size() != 1) {
      throw EvalError{"expected an integer, but " + e.str() + " is the list " + v.str(), e.offset, e.length};
    }
    return v.dims.front();
  }

  Dim arith(char op, const Dim& a, const Dim& b, const Expr& e) {
    try {
      return make_binary(op, a, b);
    } catch (const std::exception& ex) {
      throw EvalError{ex.what(), e.offset, e.length};
    }
  }

  // Binds one where clause; false when it must wait for the inputs.
  bool bind_where(const Binding& b) {
    std::optional<Value> v;
    try {
      v = eval(b.value);
    } catch (const EvalError& err) {
      failed_.insert(b.symbol);
      broken_.insert(b.symbol);
      report(Category::Where, b.symbol, "Couldn't identify " + b.symbol + ": where " + b.symbol + " = " + b.value.str() + " failed:\n " +
                           err.message + ".",
             err.offset, err.length);
      return true;
    }
    if (!v) return false;
    std::string origin = "where " + b.symbol + " = " + b.value.str();
    auto it = table_.find(b.symbol);
    if (it == table_.end()) {
      table_[b.symbol] = {*v, origin};
      return true;
    }
    if (!same_value(it->second.value, *v)) {
      report(Category::Where, b.symbol, "Couldn't identify " + b.symbol + ": " + b.symbol + " is determined as " +
                           it->second.value.str() + " (" + it->second.origin + ")\n but got: " + v->str() + " (" +
                           origin + ").",
             b.offset, b.length);
    }
    return true;
  }

  bool same_value(const Value& a, const Value& b) {
    if (a.dims.size() != b.dims.size() || a.is_list != b.is_list) return false;
    for (std::size_t i = 0; i < a.dims.size(); ++i)
      if (!unify(a.dims[i], b.dims[i])) return false;
    return true;
  }

  void report_undetermined_binding(const Binding& b) {
    failed_.insert(b.symbol);
    std::vector<std::string> missing;
    collect_missing(b.value, missing);
    // Already reported: a binding that needs one whose evaluation failed.
    bool after_failure = !missing.empty();
    for (const auto& m : missing)
      if (!broken_.count(m)) after_failure = false;
    if (after_failure) {
      broken_.insert(b.symbol);
      return;
    }
    std::string list;
    for (std::size_t i = 0; i < missing.size(); ++i) list += (i ? ", " : "") + missing[i];
    report(Category::Undetermined, b.symbol, "Couldn't identify " + b.symbol + ": where " + b.symbol + " = " + b.value.str() +
                         " uses " + list + ", which " + (missing.size() == 1 ? "is" : "are") +
                         " never determined\n (neither a constructor argument, a where binding nor a subscript of an input)." +
                         glued_operator_hint(missing),
           b.offset, b.length);
  }

  // Symbols are Lisp symbols: `i*2` is one name, not i * 2. Say so when a
  // missing name looks like arithmetic.
  static std::string glued_operator_hint(const std::vector<std::string>& missing) {
    for (const auto& m : missing) {
      std::size_t at = m.find_first_of("+*/", 1);
      if (at == std::string::npos) continue;
      return "\n Note: '" + m + "' is one symbol (names may contain + * / .); write '" + m.substr(0, at) + " " + m[at] +
             " " + m.substr(at + 1) + "' for arithmetic.";
    }
    return "";
  }

  void collect_missing(const Expr& e, std::vector<std::string>& out) const {
    if (e.kind == Expr::Kind::Symbol && !table_.count(e.name)) {
      for (const auto& m : out)
        if (m == e.name) return;
      out.push_back(e.name);
    }
    std::size_t n = e.kind == Expr::Kind::IfNumber ? 2 : e.items.size();  // the else branch is never taken
    for (std::size_t i = 0; i < n; ++i) collect_missing(e.items[i], out);
  }

  // --- inputs ----------------------------------------------------------------

  bool check_count() {
    std::size_t want = decl_.inputs.size(), got = inputs_.size();
    if (got == want) return true;
    std::string names;
    for (std::size_t i = 0; i < want; ++i) names += (i ? " " : "") + decl_.inputs[i].str();
    report(Category::Arguments, "",
           std::string("Couldn't step forward: Received too ") + (got < want ? "few" : "many") +
               " arguments: expected " + std::to_string(want) + (names.empty() ? "" : " (" + names + ")") +
               ", but got " + std::to_string(got) + ": " + shapes_str(inputs_) + ".");
    return false;
  }

  // One expected position of an argument after `where` lists are spliced in.
  struct Slot {
    const Subscript* sub;
    enum class Kind { Batch, Symbol, Fixed } kind;
    Dim fixed;          // Fixed: the expected dim
    std::string label;  // Fixed from a list symbol: the symbol's name
  };

  std::vector<Slot> expand(const Argument& a) const {
    std::vector<Slot> slots;
    for (const auto& s : a.dims) {
      switch (s.kind) {
        case Subscript::Kind::Batch: slots.push_back({&s, Slot::Kind::Batch, Dim(0), "~"}); break;
        case Subscript::Kind::Integer: slots.push_back({&s, Slot::Kind::Fixed, Dim(s.value), ""}); break;
        case Subscript::Kind::Symbol: {
          auto it = table_.find(s.name);
          if (it != table_.end() && it->second.value.is_list) {
            for (const auto& d : it->second.value.dims) slots.push_back({&s, Slot::Kind::Fixed, d, s.name});
          } else {
            slots.push_back({&s, Slot::Kind::Symbol, Dim(0), s.name});
          }
          break;
        }
      }
    }
    return slots;
  }

  std::string input_label(std::size_t i) const {
    return "the " + ordinal(i + 1) + " input " + decl_.inputs[i].str();
  }

  // The rank rules of cl-waffe2's first pass, then the subscripts.
  void match_input(std::size_t index) {
    const Argument& arg = decl_.inputs[index];
    const Shape& got = inputs_[index];
    std::vector<Slot> slots = expand(arg);
    std::size_t fixed = 0;
    std::size_t batch_at = slots.size();
    for (std::size_t i = 0; i < slots.size(); ++i) {
      if (slots[i].kind == Slot::Kind::Batch) batch_at = i;
      else ++fixed;
    }
    bool has_batch = batch_at < slots.size();
    // Every input that uses ~ has the rank of the first one that does.
    bool same_rank = true;
    if (has_batch) {
      if (!batch_input_) {
        batch_input_ = index;
      } else if (inputs_[*batch_input_].size() != got.size()) {
        same_rank = false;
        std::size_t want = inputs_[*batch_input_].size();
        report(Category::Rank, arg.name.value_or(arg.str()),
               "Couldn't identify the rank of " + input_label(index) + ": The Rank is too " +
                   (got.size() < want ? "low" : "high") + ": the given rank " + std::to_string(got.size()) +
                   " does not match the rank " + std::to_string(want) + " of " + input_label(*batch_input_) +
                   ".\n Every input that uses ~ must have the same rank; got: " + shape_str(got),
               arg.offset, arg.length);
      }
    }
    if ((has_batch && got.size() < fixed) || (!has_batch && got.size() != fixed)) {
      std::string expected = has_batch ? "at least " + std::to_string(fixed) : std::to_string(fixed);
      report(Category::Rank, arg.name.value_or(arg.str()),
             "Couldn't identify the rank of " + input_label(index) + ": The Rank is too " +
                 (got.size() < fixed ? "low" : "high") + ": the given rank " + std::to_string(got.size()) +
                 " does not match the declared " + arg.str() + ", which needs " + expected + " dim" +
                 (fixed == 1 && !has_batch ? "" : "s") + ".\n Expected " + arg.str() + ", but got: " + shape_str(got),
             arg.offset, arg.length);
      return;
    }
    std::size_t batch_len = has_batch ? got.size() - fixed : 0;
    std::size_t first_report = result_.reports.size();
    match_slots(index, slots, batch_len, same_rank);
    // "Expected A[~ j k] = (4 6)" is filled in once the whole input is read,
    // so symbols this input determines after the failing axis are known.
    std::string expected = shape_str(predict(arg));
    for (std::size_t r = first_report; r < result_.reports.size(); ++r) {
      std::string& text = result_.reports[r].text;
      for (std::size_t at; (at = text.find(kExpected)) != std::string::npos;) text.replace(at, kExpected.size(), expected);
    }
  }

  static inline const std::string kExpected = "\x01expected\x01";

  void match_slots(std::size_t index, const std::vector<Slot>& slots, std::size_t batch_len, bool same_rank) {
    const Argument& arg = decl_.inputs[index];
    const Shape& got = inputs_[index];
    std::size_t pos = 0;
    for (std::size_t i = 0; i < slots.size(); ++i) {
      const Slot& slot = slots[i];
      if (slot.kind == Slot::Kind::Batch) {
        if (same_rank) match_batch(index, *slot.sub, pos, batch_len);
        pos += batch_len;
        continue;
      }
      const Dim& g = got[pos];
      if (slot.kind == Slot::Kind::Fixed) {
        if (!unify(slot.fixed, g)) {
          std::string what = slot.label.empty() ? "axis " + std::to_string(pos) : slot.label;
          std::string expected = slot.label.empty() ? shown(slot.fixed) : table_.at(slot.label).value.str();
          report(Category::Mismatch, slot.label.empty() ? std::to_string(pos) : slot.label,
                 "Couldn't identify " + what + " of " + input_label(index) + ": " + what + " is determined as " +
                     expected + "\n but got: " + resolve(g).str() + " at axis " + std::to_string(pos) + ".\n Expected " +
                     arg.str() + " = " + kExpected + ", but got: " + shape_str(got) +
                     conflict_note(slot.fixed, g),
                 slot.sub->offset, slot.sub->length);
        }
      } else {
        const std::string& name = slot.label;
        auto it = table_.find(name);
        if (it == table_.end()) {
          table_[name] = {Value::scalar(g), input_label(index)};
        } else if (!unify(it->second.value.dims.front(), g)) {
          report(Category::Mismatch, name, "Couldn't identify " + name + ": " + name + " is determined as " +
                           shown(it->second.value.dims.front()) + " (" + it->second.origin + ")\n but got: " +
                           resolve(g).str() + " at axis " + std::to_string(pos) + " of " + input_label(index) +
                           ".\n Expected " + arg.str() + " = " + kExpected + ", but got: " + shape_str(got) +
                           conflict_note(it->second.value.dims.front(), g),
                 slot.sub->offset, slot.sub->length);
        }
      }
      ++pos;
    }
  }

  // `~` of one input: the axes [start, start + length) of its shape. As in
  // cl-waffe2, ~ is kept axis by axis, counted from the left over the rank of
  // the longest input: at each axis, the first input that covers it gives the
  // value, and the inputs after it are compared with it, but only when ~
  // appears in an output (otherwise its values never reach a shape).
  void match_batch(std::size_t index, const Subscript& sub, std::size_t start, std::size_t length) {
    const Shape& whole = inputs_[index];
    if (batch_axes_.size() < longest_rank_) batch_axes_.resize(longest_rank_);
    const bool compare = decl_.uses_batch_in_outputs();
    bool reported_length = false;
    for (std::size_t k = start; k < start + length; ++k) {
      auto& axis = batch_axes_[k];
      if (axis && compare) {
        if (whole.size() != longest_rank_) {
          if (!reported_length) {
            report(Category::Batch, "~",
                   "Couldn't identify ~: Inconsistent use of batch: ~ is read over the rank " +
                       std::to_string(longest_rank_) + " of the longest input, but " + input_label(index) + " has rank " +
                       std::to_string(whole.size()) +
                       ".\n When ~ reaches an output, cl-waffe2 compares it only between inputs as long as the longest one; got: " +
                       shape_str(whole),
                   sub.offset, sub.length);
            reported_length = true;
          }
        } else if (!unify(axis->dim, whole[k])) {
          Shape part(whole.begin() + static_cast<std::ptrdiff_t>(start),
                     whole.begin() + static_cast<std::ptrdiff_t>(start + length));
          report(Category::Batch, "~",
                 "Couldn't identify ~: ~ is determined as " + shown(axis->dim) + " \n but got: " +
                     resolve(whole[k]).str() + ".\n Expected ~ = " + shape_str(batch_value()) + ", but got: " +
                     shape_str(part) + conflict_note(axis->dim, whole[k]) + "\n Inconsistent use of batch: " +
                     input_label(axis->input) + " made axis " + std::to_string(k) + " of ~ " + shown(axis->dim) +
                     ", and " + input_label(index) + " makes it " + resolve(whole[k]).str() + ".",
                 sub.offset, sub.length);
        }
      }
      if (!axis) axis = BatchAxis{whole[k], index};
    }
    table_["~"] = {Value::list(batch_value()), input_label(*batch_input_)};
  }

  // The value of ~ so far: its determined axes, in order.
  Shape batch_value() const {
    Shape out;
    for (const auto& a : batch_axes_)
      if (a) out.push_back(resolve(a->dim));
    return out;
  }

  Shape resolved(const Shape& s) const {
    Shape out;
    for (const auto& d : s) out.push_back(resolve(d));
    return out;
  }

  // The shape `a` would have with the table as it stands; "?" where unknown.
  Shape predict(const Argument& a) const {
    Shape out;
    for (const auto& s : a.dims) {
      if (s.kind == Subscript::Kind::Integer) {
        out.push_back(Dim(s.value));
        continue;
      }
      auto it = table_.find(s.kind == Subscript::Kind::Batch ? "~" : s.name);
      if (it == table_.end()) {
        out.push_back(Dim::symbol(s.kind == Subscript::Kind::Batch ? "~" : "?"));
        continue;
      }
      for (const auto& d : it->second.value.dims) out.push_back(resolve(d));
    }
    return out;
  }

  // --- outputs ---------------------------------------------------------------

  void predict_outputs(bool inputs_read) {
    auto inplace = decl_.inplace_of();
    for (std::size_t i = 0; i < decl_.outputs.size(); ++i) {
      const Argument& a = decl_.outputs[i];
      Output out;
      out.name = a.name;
      out.inplace_of = inplace[i];
      out.shape = predict(a);
      if (inputs_read) {
        for (const auto& s : a.dims) {
          if (s.kind == Subscript::Kind::Symbol && !table_.count(s.name) && !failed_.count(s.name)) {
            report(Category::Undetermined, s.name, "Couldn't identify " + s.name + ": " + s.name + " appears in the output " + a.str() +
                               " but is never determined.\n Bind it with a constructor argument or 'where " + s.name +
                               " = ...', or use it in an input.",
                   s.offset, s.length);
          }
        }
        for (const auto& d : out.shape) {
          if (d.is_known() && d.value() < 0) {
            report(Category::Where, "", "Couldn't predict the output " + a.str() + ": its shape " + shape_str(out.shape) +
                           " has a negative size (sizes are >= 0).",
                   a.offset, a.length);
            break;
          }
        }
      }
      result_.outputs.push_back(std::move(out));
    }
  }

  const Declaration& decl_;
  const Args& args_;
  const std::vector<Shape>& inputs_;
  std::map<std::string, Entry> table_;
  std::map<std::string, Dim> subst_;
  // ~ axis by axis (see match_batch), and the first input that uses ~.
  struct BatchAxis {
    Dim dim;
    std::size_t input;
  };
  std::vector<std::optional<BatchAxis>> batch_axes_;
  std::optional<std::size_t> batch_input_;
  std::size_t longest_rank_ = 0;
  std::set<std::string> failed_;  // where bindings that failed: not reported again as undetermined
  std::set<std::string> broken_;  // where bindings that failed to evaluate, and those needing them
  mutable std::optional<std::string> overflow_;
  CheckResult result_;
};

}  // namespace

const char* category_name(Category c) {
  switch (c) {
    case Category::Arguments: return "arguments";
    case Category::Rank: return "rank";
    case Category::Batch: return "batch";
    case Category::Mismatch: return "mismatch";
    case Category::Undetermined: return "undetermined";
    case Category::Where: return "where";
  }
  return "mismatch";
}

namespace {

// The declaration with every `~` removed: cl-waffe2's second ("fixed") pass.
subscript::Declaration without_batch(subscript::Declaration d) {
  for (auto* side : {&d.inputs, &d.outputs}) {
    for (auto& a : *side) {
      std::erase_if(a.dims, [](const Subscript& s) { return s.kind == Subscript::Kind::Batch; });
    }
  }
  return d;
}

}  // namespace

CheckResult check(const subscript::Declaration& decl, const Args& args, const std::vector<Shape>& inputs) {
  CheckResult first = Checker(decl, args, inputs).run();
  if (first.ok() || (!decl.uses_batch_in_inputs() && !decl.uses_batch_in_outputs())) return first;
  // cl-waffe2 tries again without `~` (node.lisp: "If any errors occured, try
  // again with removing ~ from subscripts"), which accepts inputs where `~`
  // covers no dims, and reports the first pass's errors when that fails too.
  subscript::Declaration fixed = without_batch(decl);
  CheckResult second = Checker(fixed, args, inputs).run();
  return second.ok() ? second : first;
}

std::string render_report(const subscript::Declaration& decl, const std::vector<Shape>& inputs,
                          const CheckResult& result, const CheckOptions& options) {
  std::ostringstream os;
  os << "[wfgen] Shape-Error: Couldn't step forward because of shape-error.\n\n";
  std::string dsl = decl.str();
  if (options.operation.empty()) os << "The operation was : <Subscript: " << dsl << ">\n\n";
  else os << "The operation was : <" << options.kind << ": " << options.operation << " (" << dsl << ")>\n\n";
  std::vector<Shape> outs;
  for (const auto& o : result.outputs) outs.push_back(o.shape);
  os << "Input(s)            : " << shapes_str(inputs) << "\n";
  os << "Predicted Output(s) : " << shapes_str(outs) << "\n";
  if (options.returned) os << "Returned Output(s)  : " << shapes_str(*options.returned) << "\n";
  os << "\n";
  os << "Here's a list of reports.\n\n";
  for (std::size_t i = 0; i < result.reports.size(); ++i) {
    if (i == 1) os << "Also, these reports could be helpful for you (calculated ignoring the first errors.)\n\n";
    os << (i + 1) << ". " << result.reports[i].text << "\n";
    if (i + 1 < result.reports.size()) os << "\n";
  }
  return os.str();
}

namespace {

std::int64_t parse_int(std::string_view t, std::string_view whole) {
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc() || p != t.data() + t.size()) {
    throw std::invalid_argument("'" + std::string(t) + "' in '" + std::string(whole) + "' is not a valid size");
  }
  return v;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

Dim parse_dim(std::string_view t, std::string_view whole) {
  t = trim(t);
  if (t.empty()) throw std::invalid_argument("empty dimension in '" + std::string(whole) + "'");
  if ((t[0] >= '0' && t[0] <= '9') || t[0] == '-' || t[0] == '+') {
    std::int64_t v = parse_int(t, whole);
    if (v < 0) throw std::invalid_argument("negative size " + std::string(t) + " in '" + std::string(whole) + "'");
    return Dim(v);
  }
  if (!subscript::is_symbol(t)) {
    throw std::invalid_argument("'" + std::string(t) + "' in '" + std::string(whole) +
                                "' is neither a size nor a symbolic dim name");
  }
  return Dim::symbol(std::string(t));
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (true) {
    std::size_t p = s.find(sep, start);
    out.push_back(s.substr(start, p == std::string_view::npos ? std::string_view::npos : p - start));
    if (p == std::string_view::npos) break;
    start = p + 1;
  }
  return out;
}

}  // namespace

Shape parse_shape(std::string_view text) {
  std::string_view s = trim(text);
  if (s.size() >= 2 && s.front() == '(' && s.back() == ')') s = trim(s.substr(1, s.size() - 2));
  Shape out;
  if (s.empty()) return out;
  char sep = 'x';
  if (s.find(',') != std::string_view::npos) sep = ',';
  else if (s.find(' ') != std::string_view::npos) sep = ' ';
  else if (s.find('x') == std::string_view::npos) sep = ',';
  for (auto part : split(s, sep)) {
    if (sep == ' ' && trim(part).empty()) continue;
    out.push_back(parse_dim(part, text));
  }
  return out;
}

Value parse_value(std::string_view text) {
  std::string_view s = trim(text);
  bool list = s.find(',') != std::string_view::npos || s.find(' ') != std::string_view::npos ||
              (s.size() >= 2 && s.front() == '(');
  if (!list) {
    // A single value may be negative (an axis such as -1), unlike a size.
    if (!s.empty() && s[0] == '-') return Value::scalar(Dim(parse_int(s, text)));
    return Value::scalar(parse_dim(s, text));
  }
  Value v = Value::list(parse_shape(s));
  return v;
}

}  // namespace wfgen::shape
