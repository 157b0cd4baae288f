"""The article's toy agentic trace (docs/method.md, section 11), the oracle for the published curve."""

S0, S1, S2 = "S0", "S1", "S2"


def toy_trace() -> list[str]:
    history: list[str] = []
    trace: list[str] = []
    for i in range(1, 6):
        history += [S0, S1, S2, "P1"] if i == 1 else [f"P{i}"]
        trace += [S0, S1, S2] + history + [f"T{i}"]
    return trace


def toy_keys() -> list[int]:
    names = sorted(set(toy_trace()))
    ids = {n: i for i, n in enumerate(names)}
    return [ids[n] for n in toy_trace()]


# LRU hit rates at capacity 1..8 as published; 0.74 at every C >= 8 (37 of 50 accesses).
PUBLISHED = [0.00, 0.00, 0.30, 0.30, 0.38, 0.48, 0.60, 0.74]
