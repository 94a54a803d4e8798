"""torch's side of bench/resnet_conv_shapes.cpp: ResNet-18's convolutions
(torchvision, one 1 x 3 x 224 x 224 image) through torch.nn.functional.conv2d
with a bias (oneDNN's convolution on CPU), one thread, CPU time, best of 7;
then torchvision's whole resnet18 forward in eval mode. Issue 38 item 3:
where each shape's limit is (docs/performance-history.md).

Run: /usr/bin/python3 bench/torch_conv_shapes.py
"""
import time

import torch
import torchvision

# name, how many the forward runs, C_in, H (= W), C_out, kernel, stride, padding
CONVS = [
    ("conv1 7x7/2 3->64 @224", 1, 3, 224, 64, 7, 2, 3),
    ("layer1 3x3 64->64 @56", 4, 64, 56, 64, 3, 1, 1),
    ("layer2.0 3x3/2 64->128 @56", 1, 64, 56, 128, 3, 2, 1),
    ("layer2 ds 1x1/2 64->128", 1, 64, 56, 128, 1, 2, 0),
    ("layer2 3x3 128->128 @28", 3, 128, 28, 128, 3, 1, 1),
    ("layer3.0 3x3/2 128->256 @28", 1, 128, 28, 256, 3, 2, 1),
    ("layer3 ds 1x1/2 128->256", 1, 128, 28, 256, 1, 2, 0),
    ("layer3 3x3 256->256 @14", 3, 256, 14, 256, 3, 1, 1),
    ("layer4.0 3x3/2 256->512 @14", 1, 256, 14, 512, 3, 2, 1),
    ("layer4 ds 1x1/2 256->512", 1, 256, 14, 512, 1, 2, 0),
    ("layer4 3x3 512->512 @7", 3, 512, 7, 512, 3, 1, 1),
]


def best_us(f, reps):
    best = float("inf")
    for _ in range(7):
        t0 = time.process_time()
        for _ in range(reps):
            f()
        best = min(best, (time.process_time() - t0) / reps)
    return best * 1e6


def main():
    torch.set_num_threads(1)
    torch.manual_seed(38)
    total = 0.0
    with torch.no_grad():
        for name, count, cin, h, cout, k, stride, pad in CONVS:
            x, w, b = torch.randn(1, cin, h, h), torch.randn(cout, cin, k, k), torch.randn(cout)
            t = best_us(lambda: torch.nn.functional.conv2d(x, w, b, stride, pad), 20)
            total += count * t
            print("%-30s %3d %9.1f us" % (name, count, t))
        print("forward's convolutions: %.0f us" % total)
        model = torchvision.models.resnet18().eval()
        image = torch.randn(1, 3, 224, 224)
        print("resnet18 forward: %.0f us" % best_us(lambda: model(image), 10))


if __name__ == "__main__":
    main()
