#!/usr/bin/env python3
# Summarises the loops of a `cuobjdump -sass` listing: for each backward branch whose body holds
# FFMA or HMMA instructions, its size and opcode counts (how many FMAs, loads, unpacking ops a
# kernel loop issues).   bench/sass_loops.py SASS.txt...
import re,sys,collections
for f in sys.argv[1:]:
    ins=[]
    for line in open(f):
        m=re.match(r'\s*/\*([0-9a-f]{4,})\*/\s+(.*?);',line)
        if m: ins.append((int(m.group(1),16),m.group(2).strip()))
    addr_idx={a:i for i,(a,_) in enumerate(ins)}
    print("==",f,len(ins))
    for i,(a,t) in enumerate(ins):
        if 'BRA' in t:
            m2=re.search(r'0x([0-9a-f]+)',t)
            if not m2: continue
            tgt=int(m2.group(1),16)
            if tgt<a and tgt in addr_idx:
                body=ins[addr_idx[tgt]:i+1]
                ops=collections.Counter(re.sub(r'^@!?U?P\w+\s+','',x).split()[0].split('.')[0] for _,x in body)
                if ops['FFMA']>=16 or ops['HMMA']>0:
                    ldg=sum(v for k,v in ops.items() if k.startswith('LDG'))
                    print(f"loop {tgt:#x}-{a:#x}: {len(body)} instr, FFMA {ops['FFMA']}, LDG {ldg}, HMMA {ops['HMMA']}, top: {ops.most_common(8)}")
