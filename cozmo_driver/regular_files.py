"""Opening a file a parameter names without waiting for ever.

``open()`` of a FIFO (named pipe) waits until a program opens it to write, for good when
none does, and the read of a device (``/dev/zero``) may never end: a node that read such a
path at configure or start-up hung. :func:`open_regular` opens without waiting and refuses
anything but a regular file (:class:`NotAFileError`, naming the parameter). Pure.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import IO, Union

from .errors import ConfigurationError

__all__ = ["NotAFileError", "open_regular", "read_regular_text"]

PathLike = Union[str, "os.PathLike[str]"]

#: what a file that is not a regular one is, by its type (stat.S_IFMT)
_NOT_A_FILE = {stat.S_IFIFO: "a FIFO (named pipe)", stat.S_IFCHR: "a character device",
               stat.S_IFBLK: "a block device", stat.S_IFSOCK: "a socket"}


class NotAFileError(ConfigurationError):
    """A FIFO, a device or a socket where a file was to be read; its text says which, of
    which parameter."""

    def __init__(self, name: str, path: PathLike, kind: str) -> None:
        super().__init__(f"{name}: {os.fspath(path)} is {kind}, not a file: reading it would wait for a writer "
                         "(or never end)")
        self.filename = os.fspath(path)


def open_regular(path: PathLike, name: str, binary: bool = False) -> IO:
    """``path`` opened to read (UTF-8 text, or bytes if ``binary``) without waiting: a FIFO, a
    device or a socket is refused (:class:`NotAFileError` naming the parameter ``name``), as
    reading it would wait for a writer, or never end. OSError as open() raises it (a
    directory: IsADirectoryError)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), os.fspath(path))
        if not stat.S_ISREG(mode):
            raise NotAFileError(name, path, _NOT_A_FILE.get(stat.S_IFMT(mode), "not a regular file"))
        os.set_blocking(fd, True)
        return open(fd, "rb") if binary else open(fd, encoding="utf-8")
    except BaseException:
        os.close(fd)
        raise


def read_regular_text(path: PathLike, name: str) -> str:
    """The UTF-8 text of the file ``path`` (:func:`open_regular`: a FIFO or a device is
    refused, naming the parameter ``name``); NotAFileError, OSError, UnicodeDecodeError."""
    with open_regular(path, name) as f:
        return f.read()
