"""nanogpt.py — GPT as nanoGPT's model.py writes it, for PyTorch's side of chapter 14.

Pre-LN blocks (x + attn(ln_1(x)), then x + mlp(ln_2(x))), one c_attn (3C, C)
for q, k and v stacked in that order, a causal mask, GELU in GPT-2's tanh form,
a final LayerNorm (eps 1e-5), learned positions, an untied lm_head without a
bias. Left out from nanoGPT: dropout, weight tying, flash attention, init and
generation (the weights come from dpt). Parameter names and shapes are
nanoGPT's, so `load_state_dict(strict=True)` accepts a chapter 14 file.
Used by tests/pytorch/crosscheck_ch14.py and bench/torch_gpt_step.py;
`causal=False` drops the mask (the cross-check's control).
"""
import math

import torch

nn, F = torch.nn, torch.nn.functional


class CausalSelfAttention(nn.Module):
    def __init__(self, width, heads, context, causal):
        super().__init__()
        self.c_attn = nn.Linear(width, 3 * width)   # q, k, v stacked in that order
        self.c_proj = nn.Linear(width, width)
        self.heads, self.causal = heads, causal
        self.register_buffer("mask", torch.tril(torch.ones(context, context)).view(1, 1, context, context),
                             persistent=False)

    def forward(self, x):
        b, t, c = x.size()
        q, k, v = self.c_attn(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))  # (B, H, T, D)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        if self.causal:
            att = att.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))


class MLP(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.c_fc = nn.Linear(width, 4 * width)
        self.c_proj = nn.Linear(4 * width, width)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, width, heads, context, causal):
        super().__init__()
        self.ln_1 = nn.LayerNorm(width, eps=1e-5)
        self.attn = CausalSelfAttention(width, heads, context, causal)
        self.ln_2 = nn.LayerNorm(width, eps=1e-5)
        self.mlp = MLP(width)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab, context, layers, heads, width, causal=True):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab, width), wpe=nn.Embedding(context, width),
            h=nn.ModuleList([Block(width, heads, context, causal) for _ in range(layers)]),
            ln_f=nn.LayerNorm(width, eps=1e-5)))
        self.lm_head = nn.Linear(width, vocab, bias=False)

    def forward(self, idx):
        t = idx.size(1)
        x = self.transformer.wte(idx) + self.transformer.wpe(torch.arange(t))
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))
