"""GD-async: gradient dropping (Aji & Heafield 2017) with DGS's model-difference download
(dgs.txt §"Experimental Evaluation": the paper's baseline; docs/algorithms.md, "the DGS family").

The client keeps a residual r in parameter units and no momentum:

    r ← r + η·g;   send the top-R of |r|;   r ← r with the sent coordinates zeroed

so that, at every moment, everything sent plus r equals the accumulated Σ η·g (nothing is lost, only
delayed). The master and the client's model keeping are DGS's (`dgs.DGSServer`, `dgs.DGSClient`:
θ_k ← θ_k + G with G = M − v_k, optional secondary compression R₂ and dense resyncs); only the
client's `sparsify` hook differs. This rule is SAMomentum's m → 0 limit, so it is
`dgs.samomentum_step` with m = 0, and DGS with `momentum: 0` runs exactly this algorithm.

Choices fixed here: η is applied at the client, with the η the master sends (the warm-up's, if on); r
is never rescaled when η changes (it holds steps already scaled, not a momentum); with float16
values the rounding error of a sent entry is dropped, not kept in r.
"""
from __future__ import annotations

from typing import Literal

from edgesync.algorithms.machinery.base import AlgorithmSpec
from edgesync.algorithms.dgs import DGSClient, DGSServer, SparseAsyncConfig, samomentum_step


class GDAsyncConfig(SparseAsyncConfig):
    name: Literal["gd_async"] = "gd_async"


class GDAsyncClient(DGSClient):
    config: GDAsyncConfig

    def sparsify(self, g, lr, meta):
        """r ← r + η·g; send top-R of r; zero what was sent."""
        r, idx, self.memory["r"] = samomentum_step(self.memory.get("r"), lr * g, 0.0, self.config.rate,
                                                   self.config.topk, self.layer_sizes())
        return r, idx


SPEC = AlgorithmSpec(
    name="gd_async", config=GDAsyncConfig, server=DGSServer, client=GDAsyncClient, family="asynchronous",
    paper="Gradient dropping (Aji & Heafield 2017) with DGS's model-difference download, dgs.txt's GD-async",
)
