"""tools/setup.sh in a fresh venv without torch or triton: it installs both pins (PyPI's torch
where that is a CPU build, else the hint; ~200 MB of wheels and ~1.7 GB installed) and prints
only its own lines. Minutes (624 s at load 7-9, results/2026-12-01-cpu-newcomer-second-pass),
so it is not part of the README's test command: pytest collects this file only when named,
    python3 -m pytest -q tests/setup_without_torch_check.py
The README's own order (torch's CPU build first, then set-up) is tests/test_setup.py's.
"""
from test_setup import (DISTRIBUTIONS_SCRIPT, MODULES_SCRIPT, PINS, REQUIREMENTS,
                        assert_only_setups_own_lines, in_venv, make_venv, needs_packages,
                        run_setup, setup_lines, site_packages, venv_dir)


def test_setup_installs_the_pins_where_torch_and_triton_are_missing(venv_dir):
    needs_packages(*((pin,) for pin in PINS.values()), ("-r", str(REQUIREMENTS)))
    venv = make_venv(venv_dir)

    result = run_setup(venv)

    assert result.returncode == 0, result.stderr
    modules, distributions = in_venv(venv, MODULES_SCRIPT), in_venv(venv, DISTRIBUTIONS_SCRIPT)
    site = str(site_packages(venv))
    lines = setup_lines(result)
    for name, pin in PINS.items():
        module = modules[name]
        assert module["stand_in"] is None and module["file"].startswith(site)
        assert module["version"].split("+")[0] == pin.split("==")[1]   # torch: 2.13.0+cpu here
        assert f"setup: installed {name} {module['version']} ({pin}: no {name} was installed)" in lines
    assert modules["aiter"] is None
    assert not {"aiter", "amd-aiter"} & distributions.keys()
    assert lines[-1].startswith("setup: aiter not found: not installed")
    assert_only_setups_own_lines(result, venv)
