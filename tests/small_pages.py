"""Fresh memory touched page by page, with a page-fault count that does not depend on the host's THP setting.

Where /sys/kernel/mm/transparent_hugepage/enabled is ``always`` (CI's hosts), a large anonymous buffer is backed
by 2 MiB pages and touching it faults a few hundred times instead of once per 4 KiB page; madvise(NOHUGEPAGE)
keeps it on base pages, so the count is one fault per page touched.
"""

from __future__ import annotations

import mmap

PAGE = mmap.PAGESIZE


def touch_small_pages(mib: int) -> mmap.mmap:
    """An anonymous mapping of ``mib`` MiB on base pages, each page written once: ``mib * 2**20 / PAGE`` faults."""
    buffer = mmap.mmap(-1, mib << 20)
    buffer.madvise(mmap.MADV_NOHUGEPAGE)
    buffer[::PAGE] = b"y" * len(range(0, mib << 20, PAGE))
    return buffer
