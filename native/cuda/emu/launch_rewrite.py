"""Rewrites CUDA launches `k<<<grid, block, shmem, stream>>>(args);` into calls of
emu_launch(grid, block, lambda) for the host emulator (see build.sh). Usage:
launch_rewrite.py in.cu out.cpp"""
import re, sys
src = open(sys.argv[1]).read()
pat = re.compile(r'([A-Za-z_]\w*(?:<[^<>;]*>)?)\s*<<<(.*?)>>>\s*\((.*?)\);', re.S)
def rep(m):
    name, cfg, args = m.group(1), m.group(2), m.group(3)
    parts = [p.strip() for p in re.split(r',(?![^()]*\))', cfg)]
    grid, block = parts[0], parts[1]
    return f'emu_launch(dim3({grid}), dim3({block}), [&]() {{ {name}({args}); }});'
out, n = pat.subn(rep, src)
if n == 0 and "<<<" in src:
    sys.exit(f"{sys.argv[1]}: launches not rewritten")
open(sys.argv[2], 'w').write(out)
