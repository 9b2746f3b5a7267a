"""A network share that stops answering, for the tests: a FUSE file system (fusepy) that shows a
folder of this host as it is, until a switch file exists; from then on every request to it waits
(as a hard-mounted NFS share does when its server is gone), until the switch is removed.

    python3 hanging_share.py BACKING MOUNTPOINT SWITCH

Each request that starts waiting appends a line to SWITCH + ".waits", so a test knows that its
process is waiting on the share."""
import errno
import os
import sys
import time

from fusepy import FUSE, FuseOSError, Operations


class HangingShare(Operations):
    def __init__(self, backing, switch):
        self.backing = backing
        self.switch = switch

    def _wait_while_switched(self, what):
        if not os.path.exists(self.switch):
            return
        with open(self.switch + ".waits", "a") as f:
            f.write(what + "\n")
        while os.path.exists(self.switch):
            time.sleep(0.05)

    def _path(self, path, what):
        self._wait_while_switched(what + " " + path)
        return os.path.join(self.backing, path.lstrip("/"))

    def getattr(self, path, fh=None):
        try:
            st = os.lstat(self._path(path, "getattr"))
        except OSError as e:
            raise FuseOSError(e.errno)
        return {key: getattr(st, key) for key in ("st_mode", "st_nlink", "st_size", "st_uid", "st_gid",
                                                  "st_atime", "st_mtime", "st_ctime")}

    def readdir(self, path, fh):
        return [".", ".."] + os.listdir(self._path(path, "readdir"))

    def open(self, path, flags):
        if flags & (os.O_WRONLY | os.O_RDWR):
            raise FuseOSError(errno.EROFS)
        return os.open(self._path(path, "open"), os.O_RDONLY)

    def read(self, path, size, offset, fh):
        self._wait_while_switched("read " + path)
        return os.pread(fh, size, offset)

    def release(self, path, fh):
        os.close(fh)
        return 0


if __name__ == "__main__":
    backing, mountpoint, switch = sys.argv[1:4]
    FUSE(HangingShare(backing, switch), mountpoint, foreground=True, nothreads=False, ro=True)
