"""`pip install ./python` into a new venv of Debian's interpreter, offline: the package builds with
Debian's setuptools and imports from the venv, not from the source tree. Its own CTest test (a venv
and a build take seconds), so `unittest discover` leaves it out: run it as a script."""
import os
import shutil
import subprocess
import tempfile
import unittest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PYTHON = "/usr/bin/python3"


def offline_env():
    """No index, no extra wheel folders, no config or user site that could change what is found."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PIP_FIND_LINKS", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL")}
    env.update(PIP_NO_INDEX="1", PIP_CONFIG_FILE=os.devnull, PIP_NO_CACHE_DIR="1",
               PIP_DISABLE_PIP_VERSION_CHECK="1", PYTHONNOUSERSITE="1")
    return env


class PipInstallTest(unittest.TestCase):
    def run_in(self, cwd, *argv):
        done = subprocess.run(argv, cwd=cwd, env=offline_env(), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=300)
        self.assertEqual(done.returncode, 0, f"{' '.join(argv)}:\n{done.stdout}")
        return done.stdout

    def test_pip_installs_the_package_into_a_venv_offline(self):
        with tempfile.TemporaryDirectory() as tmp:
            # A copy: pip builds in the folder it is given, which leaves build/ and
            # lakecache.egg-info/ there.
            shutil.copytree(os.path.join(REPO, "python"), os.path.join(tmp, "python"),
                            ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
            venv = os.path.join(tmp, "venv")
            self.run_in(tmp, PYTHON, "-m", "venv", "--system-site-packages", venv)
            python = os.path.join(venv, "bin", "python")
            self.run_in(tmp, python, "-m", "pip", "install", "--no-build-isolation", "--no-index",
                        "./python")
            out = self.run_in(tmp, python, "-c", "import lakecache; print(lakecache.__file__); "
                                                 "print(lakecache.OrderHintSampler.__name__)")
            installed, name = out.split()
            self.assertTrue(installed.startswith(venv + os.sep), installed)
            self.assertIn(os.sep + "site-packages" + os.sep, installed)
            self.assertEqual(name, "OrderHintSampler")


if __name__ == "__main__":
    unittest.main()
