// The functions the page (web/app.js) calls in the WebAssembly module. The
// page writes the weights into the module's in-memory file system and the
// images into its heap; scores come back in the heap.
#include <emscripten/emscripten.h>

#include <string>

#include "classifier.hpp"

namespace {
webcnn::Classifier& classifier() {
  static webcnn::Classifier c;
  return c;
}
std::string& last_error() {
  static std::string e;
  return e;
}
int report(const wfgen::rt::Status& s) {
  if (s) return 0;
  last_error() = s.to_string();
  return 1;
}
}  // namespace

extern "C" {
// Loads the weights from `path` (a .wfparams file); 0 on success, else 1 and wfc_error() says why.
EMSCRIPTEN_KEEPALIVE int wfc_load(const char* path) { return report(classifier().load(path)); }
// scores[i * 10 + c] = the logit of class c for image i of n (pixels: n x 784 floats in 0..1); 0 or 1 as wfc_load.
EMSCRIPTEN_KEEPALIVE int wfc_classify(const float* pixels, int n, float* scores) {
  return report(classifier().classify(pixels, n, scores));
}
// The message of the last failure.
EMSCRIPTEN_KEEPALIVE const char* wfc_error() { return last_error().c_str(); }
}
