# Kept out of __init__ so that `from .version import __version__` works however the package was
# installed (an editable install made before __init__.py existed maps collectors as a namespace).
__version__ = "0.1.0"
