"""The paths a command writes its results to: whether they can be written, asked before the
work, so that a long run does not end in a traceback at its last step."""
import tempfile
from pathlib import Path


def unwritable(path: Path, folder: bool = False) -> str | None:
    """Why `path` cannot be written, as a file or (folder) as a folder to write files into;
    None where it can. It tries what the command will do: makes the missing folders, then
    opens the file for appending (an existing file is left as it is, a new one removed again)
    or creates a temporary file in the folder. A device that refuses writes (/dev/full) opens
    all the same: the command must still catch its write error."""
    where = path if folder else path.parent
    existing = next(p for p in (where, *where.parents) if p.exists() or p == p.parent)
    if not existing.is_dir():
        return f"{existing} is not a folder"
    try:
        where.mkdir(parents=True, exist_ok=True)
        if folder:
            with tempfile.TemporaryFile(dir=path):
                pass
        else:
            existed = path.exists()
            with open(path, "ab"):
                pass
            if not existed:
                path.unlink()
    except OSError as error:
        return error.strerror or str(error)
    return None
