"""The Triton decode attention's outputs on fixed inputs, for comparing two trees bit for bit (a change that must
keep the bits): the default model's heads (9 q, 3 kv, head_dim 64) and the 1.5B's (12, 2, 128), one column and a
verify step's 8 and 16, at positions 0, 100, 500 (few-split programs), 1000, 6000 (two tiles a split), PDL on
inside a CUDA graph. Run from each tree:
    python scripts/gpu/attn_bits.py save OUT.pt        (PYTHONPATH = the tree)
    python scripts/gpu/attn_bits.py compare A.pt B.pt  (prints each case; exit 1 if any differs)
"""
import math
import sys

import torch


def cases():
    from kernels.decode_attention import AttentionWorkspace, decode_attention, few_split_rows, attention_config, rope_tables
    from kernels.decode_attention_cols import decode_attention_cols

    out = {}
    for hq, hkv, d in [(9, 3, 64), (12, 2, 128)]:
        t_max = 6100
        g = torch.Generator(device="cuda").manual_seed(1234 + d)
        rnd = lambda *s, dt=torch.float32: (torch.randn(*s, generator=g, device="cuda") * 2).to(dt)
        qkv = rnd(16, (hq + 2 * hkv) * d)
        k0, v0 = rnd(hkv, t_max, d, dt=torch.bfloat16), rnd(hkv, t_max, d, dt=torch.bfloat16)
        cos, sin = rope_tables(t_max, d, device="cuda")
        few = few_split_rows(attention_config(d, torch.bfloat16))
        for p in (0, 100, 500, 1000, 6000):
            for kc in (1, 8, 16):
                k, v = k0.clone(), v0.clone()
                ws = AttentionWorkspace(hq, d, 88, "cuda", columns=16)
                o = torch.zeros(kc, hq * d, device="cuda")
                pos = torch.tensor([p], dtype=torch.int32, device="cuda")
                if kc == 1:
                    run = lambda: decode_attention(qkv[0].contiguous(), pos, k, v, cos, sin, o[0], ws, 1 / math.sqrt(d),
                                                   pdl=True)
                else:
                    run = lambda: decode_attention_cols(qkv[:kc].contiguous(), pos, k, v, cos, sin, o, ws,
                                                        1 / math.sqrt(d), pdl=True, few_splits=p + kc <= few)
                run()  # compile outside the capture
                k.copy_(k0), v.copy_(v0)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    run()
                graph.replay()
                torch.cuda.synchronize()
                out[f"h{hq}x{hkv}x{d} pos {p} cols {kc}"] = (o.cpu(), k[:, : p + kc].cpu(), v[:, : p + kc].cpu())
    return out


if __name__ == "__main__":
    if sys.argv[1] == "save":
        torch.save(cases(), sys.argv[2])
    else:
        a, b = torch.load(sys.argv[2]), torch.load(sys.argv[3])
        bad = 0
        for name in a:
            same = all(torch.equal(x, y) for x, y in zip(a[name], b[name]))
            bad += not same
            print(f"{name}: {'same bits' if same else 'DIFFERENT'}")
        print(f"{len(a) - bad} of {len(a)} cases the same bits")
        sys.exit(1 if bad else 0)
