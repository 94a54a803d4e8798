#!/usr/bin/env python3
"""Writes onnx_recurrent.onnx (committed beside this script), the ONNX graph
whose import test_autodiff checks by finite differences: an LSTM
(bidirectional, initial states given, peepholes), a GRU (reverse,
linear_before_reset 1, batch-first layout) and an RNN (forward, no bias, no
initial state) over small inputs. Every weight is a graph input (x_*), so the
check perturbs all of them; `wfgen import` turns it into a spec at build time
(tests/autodiff/CMakeLists.txt).

Usage: /usr/bin/python3 tests/autodiff/onnx_recurrent.py [OUT]
"""
import os
import sys

import onnx
from onnx import TensorProto, helper

T, B, I, H = 3, 2, 3, 2


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "onnx_recurrent.onnx")
    f = TensorProto.FLOAT
    inputs = [("x_X", [T, B, I]), ("x_Xb", [B, T, I]),
              ("x_lstm_W", [2, 4 * H, I]), ("x_lstm_R", [2, 4 * H, H]), ("x_lstm_B", [2, 8 * H]),
              ("x_lstm_h0", [2, B, H]), ("x_lstm_c0", [2, B, H]), ("x_lstm_P", [2, 3 * H]),
              ("x_gru_W", [1, 3 * H, I]), ("x_gru_R", [1, 3 * H, H]), ("x_gru_B", [1, 6 * H]),
              ("x_rnn_W", [1, H, I]), ("x_rnn_R", [1, H, H])]
    outputs = [("lstm_Y", [T, 2, B, H]), ("lstm_Y_h", [2, B, H]), ("lstm_Y_c", [2, B, H]),
               ("gru_Y", [B, T, 1, H]), ("gru_Y_h", [B, 1, H]), ("rnn_Y", [T, 1, B, H])]
    nodes = [
        helper.make_node("LSTM", ["x_X", "x_lstm_W", "x_lstm_R", "x_lstm_B", "", "x_lstm_h0", "x_lstm_c0", "x_lstm_P"],
                         ["lstm_Y", "lstm_Y_h", "lstm_Y_c"], name="lstm", hidden_size=H, direction="bidirectional"),
        helper.make_node("GRU", ["x_Xb", "x_gru_W", "x_gru_R", "x_gru_B"], ["gru_Y", "gru_Y_h"], name="gru",
                         hidden_size=H, direction="reverse", linear_before_reset=1, layout=1),
        helper.make_node("RNN", ["x_X", "x_rnn_W", "x_rnn_R"], ["rnn_Y"], name="rnn", hidden_size=H),
    ]
    graph = helper.make_graph(nodes, "onnx_recurrent", [helper.make_tensor_value_info(n, f, d) for n, d in inputs],
                              [helper.make_tensor_value_info(n, f, d) for n, d in outputs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], producer_name="onnx_recurrent.py")
    model.ir_version = 7
    onnx.checker.check_model(model)
    onnx.save(model, out)


if __name__ == "__main__":
    main()
