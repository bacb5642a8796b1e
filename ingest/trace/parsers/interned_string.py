"""``{"str": ["/path/file.py", 3]}``: the intern table that stack frames refer to by index."""


def parse(env, ctx) -> None:
    v = env.value
    if isinstance(v, list) and len(v) == 2 and isinstance(v[0], str) and isinstance(v[1], int):
        ctx.strings[v[1]] = v[0]
