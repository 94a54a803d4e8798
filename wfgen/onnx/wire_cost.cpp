// The memory protobuf's parser would take for a model file, estimated from
// its wire format before it is parsed (untrusted.hpp, parse_cost).
//
// The parser takes memory for every message and string it reads, far more
// than their bytes on the wire: a graph of empty nodes (2 bytes each) takes
// ~180 bytes a node. A walk over the wire format with ONNX's schema (written
// out here: onnx_proto is built for the lite runtime, without descriptors)
// adds up what the parse would allocate.
#include <onnx/onnx_pb.h>

#include <cstdint>

#include "wfgen/onnx/untrusted.hpp"

namespace wfgen::onnx_import {

namespace {

enum Kind {
  kNone, kModel, kGraph, kNode, kAttribute, kValueInfo, kType, kTypeTensor, kTypeElem, kTypeMap, kShape, kDim,
  kTensor, kSegment, kSparse, kTraining, kFunction, kPair, kAnnotation,
  // Scalars stored as arrays when repeated: how a packed run of them is counted.
  kVarints, kFixed32, kFixed64
};

// What field `number` of a message of kind `k` holds: a message kind, a
// scalar array kind, or kNone (a string, a single scalar, or unknown).
Kind field_kind(Kind k, std::uint32_t number) {
  switch (k) {
    case kModel: return number == 7 ? kGraph : number == 8 ? kPair : number == 14 ? kPair : number == 20 ? kTraining
                      : number == 25 ? kFunction : kNone;
    case kGraph: return number == 1 ? kNode : number == 5 ? kTensor : number == 15 ? kSparse
                      : (number == 11 || number == 12 || number == 13) ? kValueInfo : number == 14 ? kAnnotation : kNone;
    case kNode: return number == 5 ? kAttribute : kNone;
    case kAttribute: return (number == 5 || number == 10) ? kTensor : (number == 6 || number == 11) ? kGraph
                          : (number == 22 || number == 23) ? kSparse : (number == 14 || number == 15) ? kType
                          : number == 7 ? kFixed32 : number == 8 ? kVarints : kNone;
    case kValueInfo: return number == 2 ? kType : kNone;
    case kType: return number == 1 || number == 8 ? kTypeTensor : (number == 4 || number == 9) ? kTypeElem
                     : number == 5 ? kTypeMap : kNone;
    case kTypeTensor: return number == 2 ? kShape : kNone;
    case kTypeElem: return number == 1 ? kType : kNone;
    case kTypeMap: return number == 2 ? kType : kNone;
    case kShape: return number == 1 ? kDim : kNone;
    case kTensor: return number == 3 ? kSegment : number == 13 ? kPair : (number == 1 || number == 5 || number == 7 || number == 11) ? kVarints
                       : number == 4 ? kFixed32 : number == 10 ? kFixed64 : kNone;
    case kSparse: return (number == 1 || number == 2) ? kTensor : number == 3 ? kVarints : kNone;
    case kTraining: return (number == 1 || number == 2) ? kGraph : (number == 3 || number == 4) ? kPair : kNone;
    case kFunction: return number == 11 ? kAttribute : number == 7 ? kNode : number == 9 ? kPair : kNone;
    case kAnnotation: return number == 2 ? kPair : kNone;
    default: return kNone;
  }
}

// Bytes a parsed message of kind `k` takes: its object, its pointer in the
// repeated field (whose array grows by doubling) and the allocator's overhead.
std::uint64_t message_cost(Kind k) {
  std::size_t size = 0;
  switch (k) {
    case kModel: size = sizeof(onnx::ModelProto); break;
    case kGraph: size = sizeof(onnx::GraphProto); break;
    case kNode: size = sizeof(onnx::NodeProto); break;
    case kAttribute: size = sizeof(onnx::AttributeProto); break;
    case kValueInfo: size = sizeof(onnx::ValueInfoProto); break;
    case kType: size = sizeof(onnx::TypeProto); break;
    case kTypeTensor: size = sizeof(onnx::TypeProto_Tensor); break;
    case kTypeElem: size = sizeof(onnx::TypeProto_Sequence); break;
    case kTypeMap: size = sizeof(onnx::TypeProto_Map); break;
    case kShape: size = sizeof(onnx::TensorShapeProto); break;
    case kDim: size = sizeof(onnx::TensorShapeProto_Dimension); break;
    case kTensor: size = sizeof(onnx::TensorProto); break;
    case kSegment: size = sizeof(onnx::TensorProto_Segment); break;
    case kSparse: size = sizeof(onnx::SparseTensorProto); break;
    case kTraining: size = sizeof(onnx::TrainingInfoProto); break;
    case kFunction: size = sizeof(onnx::FunctionProto); break;
    case kPair: size = sizeof(onnx::StringStringEntryProto); break;
    case kAnnotation: size = sizeof(onnx::TensorAnnotation); break;
    default: break;
  }
  // Twice the object, measured: a graph of a million empty nodes takes 358 MB
  // in the parse (NodeProto is 128 bytes; the allocator and the repeated
  // field's growth take the rest).
  return 2 * size + 64;
}

bool varint(const char*& p, const char* end, std::uint64_t& v) {
  v = 0;
  for (int shift = 0; shift < 64 && p < end; shift += 7) {
    const auto b = static_cast<unsigned char>(*p++);
    v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
    if (b < 0x80) return true;
  }
  return false;
}

// Adds to `cost` what parsing [p, end) as a message of kind `k` allocates;
// false when the bytes are not ONNX's wire format (groups, a cut field,
// nesting deeper than kMaxNesting).
bool walk(const char* p, const char* end, Kind k, int depth, std::uint64_t& cost) {
  if (depth > kMaxNesting) return false;
  while (p < end) {
    std::uint64_t tag = 0, n = 0;
    if (!varint(p, end, tag)) return false;
    const auto number = static_cast<std::uint32_t>(tag >> 3);
    const Kind f = field_kind(k, number);
    switch (tag & 7) {
      case 0:
        if (!varint(p, end, n)) return false;
        cost += 8;  // an element of a repeated scalar (a single one costs nothing: counted high)
        break;
      case 1: if (end - p < 8) return false; p += 8; cost += 8; break;
      case 5: if (end - p < 4) return false; p += 4; cost += 4; break;
      case 2: {
        if (!varint(p, end, n) || n > static_cast<std::uint64_t>(end - p)) return false;
        const char* body_end = p + n;
        if (f >= kModel && f < kVarints) {
          cost += message_cost(f);
          if (!walk(p, body_end, f, depth + 1, cost)) return false;
        } else if (f == kVarints) {
          for (const char* q = p; q < body_end; ++q) cost += static_cast<unsigned char>(*q) < 0x80 ? 8 : 0;
        } else if (f == kFixed32 || f == kFixed64) {
          cost += n;
        } else {
          cost += 48 + n;  // a string (or an unknown field kept as bytes)
        }
        p = body_end;
        break;
      }
      default: return false;  // groups: not in ONNX
    }
  }
  return true;
}

}  // namespace

std::optional<std::uint64_t> parse_cost(std::string_view bytes) {
  std::uint64_t cost = message_cost(kModel) + bytes.size();
  if (!walk(bytes.data(), bytes.data() + bytes.size(), kModel, 0, cost)) return std::nullopt;
  return cost;
}

}  // namespace wfgen::onnx_import
