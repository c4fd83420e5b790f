"""In-tree PEP 517 build backend for grpo_studio_dump (pyproject.toml: backend-path = ["_backend"]).

It needs nothing but the standard library, so `pip install ./python` works offline, in pip's isolated build
environment (no setuptools to download) as with --no-build-isolation. It builds a pure-Python wheel
(py3-none-any) of the packages named in [tool.grpo_studio_build], an sdist, and an editable wheel (PEP 660:
a .pth file pointing at this source tree). pyproject.toml is read with a few regular expressions (tomllib
is Python >= 3.11 only); tests/python/dump_package.py checks them against tomllib.
"""
import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def project():
    """name, version, description, requires-python and the packages, from pyproject.toml."""
    text = open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8").read()

    def table(name):
        m = re.search(r"^\[" + re.escape(name) + r"\]\s*$(.*?)(?=^\[|\Z)", text, re.M | re.S)
        return m.group(1) if m else ""

    def key(body, k):
        m = re.search(r'^' + re.escape(k) + r'\s*=\s*"([^"]*)"', body, re.M)
        return m.group(1) if m else None

    proj = table("project")
    pk = re.search(r"^packages\s*=\s*\[([^\]]*)\]", table("tool.grpo_studio_build"), re.M)
    return {
        "name": key(proj, "name"),
        "version": key(proj, "version"),
        "description": key(proj, "description") or "",
        "requires_python": key(proj, "requires-python"),
        "packages": re.findall(r'"([^"]+)"', pk.group(1)) if pk else [],
    }


def _dist(p):
    return "%s-%s" % (re.sub(r"[-_.]+", "_", p["name"]), p["version"])


def _metadata(p):
    lines = ["Metadata-Version: 2.1", "Name: " + p["name"], "Version: " + p["version"], "Summary: " + p["description"]]
    if p["requires_python"]:
        lines.append("Requires-Python: " + p["requires_python"])
    lines += ["Provides-Extra: torch", 'Requires-Dist: torch; extra == "torch"', 'Requires-Dist: safetensors; extra == "torch"']
    readme = os.path.join(ROOT, "README.md")
    body = open(readme, encoding="utf-8").read() if os.path.exists(readme) else ""
    return ("\n".join(lines) + "\nDescription-Content-Type: text/markdown\n\n" + body).encode()


WHEEL = b"Wheel-Version: 1.0\nGenerator: grpo_studio_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


def _package_files(p):
    for pkg in p["packages"]:
        for base, dirs, files in os.walk(os.path.join(ROOT, pkg)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for f in sorted(files):
                if f.endswith((".py", ".typed")):
                    full = os.path.join(base, f)
                    yield os.path.relpath(full, ROOT).replace(os.sep, "/"), full


def _write_wheel(wheel_directory, p, entries):
    dist = _dist(p)
    info = dist + ".dist-info"
    entries = list(entries) + [(info + "/METADATA", _metadata(p)), (info + "/WHEEL", WHEEL)]
    name = dist + "-py3-none-any.whl"
    record = []
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for arc, data in entries:
            z.writestr(arc, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append("%s,sha256=%s,%d" % (arc, digest, len(data)))
        record.append(info + "/RECORD,,")
        z.writestr(info + "/RECORD", "\n".join(record) + "\n")
    return name


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    p = project()
    info = _dist(p) + ".dist-info"
    os.makedirs(os.path.join(metadata_directory, info), exist_ok=True)
    with open(os.path.join(metadata_directory, info, "METADATA"), "wb") as f:
        f.write(_metadata(p))
    with open(os.path.join(metadata_directory, info, "WHEEL"), "wb") as f:
        f.write(WHEEL)
    return info


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    p = project()
    return _write_wheel(wheel_directory, p, [(arc, open(full, "rb").read()) for arc, full in _package_files(p)])


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    p = project()
    return _write_wheel(wheel_directory, p, [(p["name"] + "_editable.pth", (ROOT + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None):
    p = project()
    dist = _dist(p)
    name = dist + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as t:
        files = [("pyproject.toml", os.path.join(ROOT, "pyproject.toml")), ("README.md", os.path.join(ROOT, "README.md")),
                 ("_backend/grpo_studio_build.py", os.path.abspath(__file__))] + list(_package_files(p))
        for arc, full in files:
            if os.path.exists(full):
                t.add(full, arcname=dist + "/" + arc)
        pkg_info = _metadata(p)
        ti = tarfile.TarInfo(dist + "/PKG-INFO")
        ti.size = len(pkg_info)
        t.addfile(ti, io.BytesIO(pkg_info))
    return name
