"""Runs nccl_train from its shared library loaded as PyTorch, JAX and CuPy load NCCL: Python
dlopens the library RTLD_LOCAL, so its libnccl.so.2 (a dependency) is not in the global scope.

    python3 ctypes_train.py <libnccl_train_lib.so> [nccl_train options...]
"""
import ctypes
import os
import sys

library = ctypes.CDLL(sys.argv[1], mode=os.RTLD_LOCAL)
arguments = [b"nccl_train"] + [argument.encode() for argument in sys.argv[2:]]
argv = (ctypes.c_char_p * (len(arguments) + 1))(*arguments, None)
sys.stdout.flush()
sys.exit(library.nccl_train_main(len(arguments), argv))
