"""Evidence files (profiler traces, Flight Recorder dumps) written into a job's folder of the
capture directory, which other users of the machine may share: nothing is opened through a
link one of them could plant there.

    size = write_in_own_folder(folder, "trace_rank0_step5.json", write, create=True)

The folder is opened without following a link and must belong to this process's user; the
file is created exclusively under a temporary name (<name>.<pid>.part) through the folder's
descriptor, written by `write(fd)`, then renamed in the same folder, so that the sidecar never
reads half a file. A failure raises and leaves no temporary file.
"""
import os


def write_in_own_folder(directory, name, write, create=False):
    """Writes `name` in `directory` through `write(fd)` (fd: the temporary file, open for
    writing); returns its size in bytes. With `create`, the folder is made if missing (its
    parent is the operator's capture directory). Modes are 0777/0666 less the umask: a sidecar
    of the trainer's group may read them."""
    folder = _open_folder(directory, create)
    try:
        owner = os.fstat(folder).st_uid
        if owner != os.geteuid():
            raise PermissionError(f"{directory} belongs to uid {owner}, not to this process's "
                                  f"{os.geteuid()}")
        temporary = f"{name}.{os.getpid()}.part"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(temporary, flags, 0o666, dir_fd=folder)
        except FileExistsError:  # this pid's, from an earlier try
            os.unlink(temporary, dir_fd=folder)
            fd = os.open(temporary, flags, 0o666, dir_fd=folder)
        try:
            write(fd)
            size = os.fstat(fd).st_size
            os.rename(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            try:
                os.unlink(temporary, dir_fd=folder)
            except OSError:
                pass
            raise
        finally:
            os.close(fd)
    finally:
        os.close(folder)
    return size


def write_all(fd, text):
    """A `write` for write_in_own_folder: `text` (str) as UTF-8."""
    data = text.encode("utf-8")
    while data:
        data = data[os.write(fd, data):]


def _open_folder(directory, create):
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    if not create:
        return os.open(directory, flags)
    parent, leaf = os.path.split(os.path.abspath(directory))
    os.makedirs(parent, exist_ok=True)  # the capture directory: the operator's
    parent_fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        try:
            os.mkdir(leaf, 0o777, dir_fd=parent_fd)
        except FileExistsError:
            pass
        return os.open(leaf, flags, dir_fd=parent_fd)
    finally:
        os.close(parent_fd)
