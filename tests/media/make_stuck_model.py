"""Makes tests/media/stuck_on_white.pt: a TorchScript classifier (12 classes, like the shipped pattern
CNN) that never returns from a batch holding a bright frame (mean normalised value above 1.5: a white
frame of `test://blink`), and answers at once otherwise. The stage watchdog's end-to-end test uses it
for an infer process stuck in its own work, as a CUDA call that never returns would leave it.

Usage: /usr/bin/python3 tests/media/make_stuck_model.py tests/media/stuck_on_white.pt (needs Debian's
python3-torch; the file is checked in, so the tests do not).
"""
import sys

import torch


class StuckOnWhite(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.head = torch.nn.Linear(3, 12)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if bool((x.mean(dim=(1, 2, 3)) > 1.5).any()):
            spins = 0
            while spins >= 0:  # stuck: an int64 that would take centuries to wrap
                spins = spins + 1
        return self.head(x.mean(dim=(2, 3)))


if __name__ == "__main__":
    torch.manual_seed(0)
    model = torch.jit.script(StuckOnWhite().eval())
    out = model(torch.zeros(2, 3, 224, 224))
    assert out.shape == (2, 12)
    model.save(sys.argv[1] if len(sys.argv) > 1 else "stuck_on_white.pt")
