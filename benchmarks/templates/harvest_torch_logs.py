"""Produce torch_logs_2.13_eager.txt: real TORCH_LOGS output of PyTorch's own graph-break,
recompile and recompile-limit messages, the templates gen_team_year.py grows a team-year from.

    TORCH_LOGS="graph_breaks,recompiles" python benchmarks/templates/harvest_torch_logs.py \
        > benchmarks/templates/torch_logs_2.13_eager.txt 2>&1

Recorded with torch 2.13.0 (CPU build), backend="eager" so it takes seconds on a laptop. Each
case is a minimal version of a pattern that shows up in real models.
"""
import random
import threading

import torch
import torch._dynamo


def f_print(x):
    y = x * 2
    print("step done")
    return y + 1


def f_branch(x):
    if x.sum() > 0:
        return x + 1
    return x - 1


def f_item(x):
    n = x.sum().item()
    return x * n


def f_tolist(x):
    return torch.tensor(x.tolist()) + 1


def f_random(x):
    return x * random.random()


def f_nonzero(x):
    return x.nonzero()


def f_graph_break(x):
    x = x + 1
    torch._dynamo.graph_break()
    return x * 2


_lock = threading.Lock()


def f_lock(x):
    with _lock:
        return x + 1


def f_backward(x):
    y = (x * 2).sum()
    y.backward()
    return x.grad


def f_requires_grad(x):
    x.requires_grad_()
    return x * 2


def f_shapes(x):
    return x.sin() + x.shape[0]


def f_guards(x):
    return x.sin() * 2


def f_len(xs):
    return sum(xs)


def f_flag(x, flag):
    return x + 1 if flag else x - 1


def f_scalar(x, y):
    return x + y


class Cfg:
    pass


def f_attr(x, c):
    return x + c.v


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x)


def main():
    for fn, arg in [(f_print, torch.randn(3)), (f_branch, torch.randn(3)), (f_item, torch.randn(3)),
                    (f_tolist, torch.randn(3)), (f_random, torch.randn(3)), (f_nonzero, torch.randn(4)),
                    (f_graph_break, torch.randn(3)), (f_lock, torch.randn(3)),
                    (f_backward, torch.randn(3, requires_grad=True)), (f_requires_grad, torch.randn(3))]:
        try:
            torch.compile(fn, backend="eager")(arg)
        except Exception as e:  # a case that errors still logged its graph break
            print("case", fn.__name__, "raised", type(e).__name__)

    # a recompile storm up to the default recompile_limit (8), then the limit message
    g = torch.compile(f_shapes, backend="eager", dynamic=False)
    for n in range(2, 12):
        g(torch.randn(n))

    g = torch.compile(f_guards, backend="eager", dynamic=False)
    g(torch.randn(4, 4))
    g(torch.randn(4, 4, dtype=torch.float64))
    g(torch.randn(4, 4, requires_grad=True))
    g(torch.randn(4, 4).t())
    with torch.no_grad():
        g(torch.randn(4, 4, requires_grad=True))

    h = torch.compile(f_len, backend="eager")
    h([torch.randn(2), torch.randn(2)])
    h([torch.randn(2), torch.randn(2), torch.randn(2)])

    t = torch.compile(f_flag, backend="eager")
    t(torch.randn(2), True)
    t(torch.randn(2), False)

    s = torch.compile(f_scalar, backend="eager")
    s(torch.randn(2), 1)
    s(torch.randn(2), 1.5)

    a = torch.compile(f_attr, backend="eager")
    for i in range(3):
        c = Cfg()
        c.v = i
        a(torch.randn(3), c)

    m = Block()
    cm = torch.compile(m, backend="eager")
    cm(torch.randn(2, 4))
    m.eval()
    cm(torch.randn(2, 4))


if __name__ == "__main__":
    main()
