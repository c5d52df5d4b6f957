#!/usr/bin/python3
"""torchrun as Debian 12 ships it (torch 1.13.1 under Python 3.11), made to start its ranks.

Its torch.distributed.elastic Std.from_str looks the enum's zero member up in a way Python 3.11's
flags no longer answer (AttributeError: 'NoneType' object has no attribute 'get' before any rank
starts). This replaces that one function with one that parses the same "0" / "0:3,1:0" forms, and
then runs the real launcher, torch.distributed.run.main, with the command line it was given.
Usage: torchrun.py [torchrun's options] CMD ARGS..."""
import sys

from torch.distributed.elastic.multiprocessing import api


def from_str(cls, vm):
    if vm.isdigit():
        return cls(int(vm))
    out = {}
    for item in vm.split(","):
        rank, _, value = item.partition(":")
        out[int(rank)] = cls(int(value))
    return out


api.Std.from_str = classmethod(from_str)

from torch.distributed.run import main  # noqa: E402  (after the fix above)

sys.exit(main())
