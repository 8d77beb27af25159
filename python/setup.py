"""The wheel holds libda3go.so, a native library for one platform but any
Python 3 (it is loaded with ctypes): a platform wheel tagged py3-none-<platform>."""
from setuptools import setup
from setuptools.dist import Distribution

try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # setuptools < 70
    from wheel.bdist_wheel import bdist_wheel


class NativeDistribution(Distribution):
    def has_ext_modules(self) -> bool:
        return True  # the bundled libda3go.so


class PlatformWheel(bdist_wheel):
    def get_tag(self) -> tuple:
        return ("py3", "none", super().get_tag()[2])


setup(distclass=NativeDistribution, cmdclass={"bdist_wheel": PlatformWheel})
