"""What freeing tensors costs, in Python alone: the work R's finalizers do
when a collection releases the gradients a loop held (bench/README.md,
"Whose garbage").

Prints the time to free 38 gradients of n float32 elements at once, and
the time per step of a loop that frees each gradient when the next
replaces it against one that holds 38 and frees them together (as R does
between customgrad's collections), alternated.

Usage: KERAS_BACKEND=jax python bench/freeing.py [N]
"""

import sys
import time

import keras

import reference

n = float(sys.argv[1]) if len(sys.argv) > 1 else 1e6
x = reference.make_input(n)
HELD = 38  # steps between two collections in an op_grad() loop at 1e6


def step():
    return reference._sync(reference.python_eager(x))


def free_at_once():
    held = [step() for _ in range(HELD)]
    t0 = time.perf_counter()
    held.clear()
    return (time.perf_counter() - t0) * 1e6


def loop(hold, steps=5 * HELD):
    held = []
    t0 = time.perf_counter()
    for _ in range(steps):
        g = step()
        if hold:
            held.append(g)
            if len(held) == HELD:
                held.clear()
    return (time.perf_counter() - t0) / steps * 1e6


if __name__ == "__main__":
    print(f"{keras.config.backend()}, n = {n:g}")
    for _ in range(3):
        print(f"free {HELD} gradients at once: {free_at_once():.0f} us")
    # Alternated, 8 of each: the machine is noisy.
    times = {False: [], True: []}
    for _ in range(8):
        for hold in (False, True):
            times[hold].append(loop(hold))
    med = {hold: sorted(t)[len(t) // 2] for hold, t in times.items()}
    print(
        f"us per step (median of 8): each freed at once {med[False]:.0f}, "
        f"{HELD} held then freed {med[True]:.0f} ({med[True] / med[False]:.2f}x)"
    )
