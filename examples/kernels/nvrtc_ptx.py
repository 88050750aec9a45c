#!/usr/bin/env python3
"""Makes the examples' PTX without nvcc, through NVRTC from PyPI (where no CUDA toolkit is
installed; build.sh with nvcc is the reference way):

    pip download nvidia-cuda-nvrtc-cu12 --no-deps -d /tmp/nvrtc
    unzip -q -o /tmp/nvrtc/nvidia_cuda_nvrtc_cu12-*.whl -d /tmp/nvrtc/x
    python3 examples/kernels/nvrtc_ptx.py /tmp/nvrtc/x/nvidia/cuda_nvrtc/lib/libnvrtc.so.12

Compiles every examples/kernels/*.cu to the .ptx beside it with --gpu-architecture=compute_75.
"""
import ctypes
import glob
import os
import sys


def compile_one(lib, path):
    src = open(path, "rb").read()
    prog = ctypes.c_void_p()
    name = os.path.basename(path).encode()
    if lib.nvrtcCreateProgram(ctypes.byref(prog), src, name, 0, None, None) != 0:
        sys.exit(f"{path}: nvrtcCreateProgram failed")
    opts = [b"--gpu-architecture=compute_75"]
    arr = (ctypes.c_char_p * len(opts))(*opts)
    code = lib.nvrtcCompileProgram(prog, len(opts), arr)
    size = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetProgramLog(prog, log)
    if log.value.strip():
        print(f"{path}:\n{log.value.decode()}", file=sys.stderr)
    if code != 0:
        sys.exit(f"{path}: compilation failed ({code})")
    lib.nvrtcGetPTXSize(prog, ctypes.byref(size))
    ptx = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetPTX(prog, ptx)
    out = path[: -len(".cu")] + ".ptx"
    open(out, "wb").write(ptx.value)
    lib.nvrtcDestroyProgram(ctypes.byref(prog))
    print(f"{path} -> {out}")


def main():
    lib = ctypes.CDLL(sys.argv[1] if len(sys.argv) > 1 else "libnvrtc.so.12")
    here = os.path.dirname(os.path.abspath(__file__))
    for path in sorted(glob.glob(os.path.join(here, "*.cu"))):
        compile_one(lib, os.path.relpath(path))


if __name__ == "__main__":
    main()
