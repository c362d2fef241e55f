"""The client half shared by gradient-pushing algorithms (SSGD, ASGD and their variants).

It loads the model it is sent, computes one mini-batch gradient and returns it, with the model's
BatchNorm statistics after that forward pass. The instruction's `version` is echoed back so the
server half can measure staleness, and the gradient's RMS is reported, the gap's normaliser.
"""
from __future__ import annotations

from edgesync.algorithms.machinery.base import ClientAlgorithm, Instruction, Update
from edgesync.algorithms.machinery.staleness import GRAD_RMS, rms


class GradientClient(ClientAlgorithm):
    def on_instruction(self, instruction: Instruction) -> Update:
        trainer = self.trainer
        trainer.set_params(instruction.tensors["params"])
        if "buffers" in instruction.tensors:
            trainer.set_buffers(instruction.tensors["buffers"])
        g, loss = trainer.gradient(self.config.weight_decay)
        tensors = {"grad": g}
        buffers = trainer.get_buffers()
        if buffers.numel():
            tensors["buffers"] = buffers
        # the RMS of g, the gap's normaliser (staleness.py), measured here where g is still in the cache: one
        # pass less for the coordinator, whose time a busy fleet waits on
        meta = {"loss": loss, "steps": 1, "samples": trainer.batch_samples, "data_size": trainer.num_samples,
                "version": instruction.meta.get("version", 0), GRAD_RMS: rms(g)}
        return Update(tensors=tensors, meta=meta)


def model_instruction(params, buffers, version: int, **meta) -> Instruction:
    """An instruction carrying the whole model (θ and, when the model has any, its buffers)."""
    tensors = {"params": params}
    if buffers.numel():
        tensors["buffers"] = buffers
    return Instruction(tensors=tensors, meta={"version": version, **meta})
