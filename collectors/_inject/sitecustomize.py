"""compilewatch's injected sitecustomize (this folder is prepended to the child's PYTHONPATH by
`compilewatch collect`). It times every torch.compile'd callable once torch is imported, and then
runs the sitecustomize that would have run without us, if any. Does nothing unless
$COMPILEWATCH_TIMINGS is set, and never imports torch itself."""
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _hooks():
    try:
        import compilewatch.collectors.hooks as hooks
        return hooks
    except ImportError:
        pass
    # The child's interpreter may not have compilewatch installed: load hooks.py from our tree.
    path = os.path.join(os.path.dirname(_HERE), "hooks.py")
    spec = importlib.util.spec_from_file_location("compilewatch.collectors.hooks", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["compilewatch.collectors.hooks"] = mod
    spec.loader.exec_module(mod)
    return mod


class _TorchImportHook(importlib.abc.MetaPathFinder):
    """Finds torch with the other finders, then patches it right after its __init__ has run."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        sys.meta_path.remove(self)
        loader = spec.loader
        orig_exec = loader.exec_module

        def exec_module(module):
            orig_exec(module)
            try:
                _hooks().install(module)
            except Exception as e:  # never break the job
                sys.stderr.write(f"compilewatch hooks: not installed: {e}\n")

        loader.exec_module = exec_module
        return spec


def _chain():
    """Run the next sitecustomize on the path (the one we shadow), if there is one."""
    paths = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", paths)
    if spec is None or spec.origin is None or os.path.dirname(os.path.abspath(spec.origin)) == _HERE:
        return
    mod = importlib.util.module_from_spec(spec)
    sys.modules["_compilewatch_chained_sitecustomize"] = mod
    spec.loader.exec_module(mod)


if os.environ.get("COMPILEWATCH_TIMINGS") and os.environ.get("COMPILEWATCH_HOOKS", "1") != "0":
    if "torch" in sys.modules:
        _hooks().install(sys.modules["torch"])
    else:
        sys.meta_path.insert(0, _TorchImportHook())

try:
    _chain()
except Exception as e:
    sys.stderr.write(f"compilewatch: the original sitecustomize failed: {e!r}\n")
