"""The scenario's `dataset`, `model` and `partition` sections: what is trained, on what, split how."""
from __future__ import annotations

import os
from pathlib import Path
from collections.abc import Callable
from typing import Any, ClassVar, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from edgesync.config.strict import Strict
from edgesync.data.datasets import DATASET_NAMES, FILE_DATASETS, check_dataset_args, outside_loader
from edgesync.data.fashion_mnist import ENV_VAR as DATA_ENV_VAR
from edgesync.data.flwr_partitioners import FLWR_KIND, check_args, usable_names
from edgesync.data.partition import PARTITION_KINDS
from edgesync.models import MODEL_NAMES, model_id, outside_builder


class OutsideNamed(Strict):
    """A section naming a built-in component or outside code (edgesync/extensions.py) with the arguments of its
    callable: a dataset's loader or a model's builder. Subclasses give `name` and `args` their defaults and say
    which kind they are."""

    KIND: ClassVar[str]
    BUILT_IN: ClassVar[tuple[str, ...]]
    BUILT_IN_WITH_ARGS: ClassVar[tuple[str, ...]] = ()  # the built-in names that take args (a user's own files)
    CALLABLE: ClassVar[str]  # what the outside callable is: "loader", "builder"
    outside: ClassVar[Callable[[str], Any]]  # the outside callable `name` stands for, None if it names none

    @field_validator("name", check_fields=False)
    @classmethod
    def _known(cls, name: str) -> str:
        if name not in cls.BUILT_IN and cls.outside(name) is None:  # ExtensionError (a ValueError) says why
            raise ValueError(f"unknown {cls.KIND}; known names: {', '.join(cls.BUILT_IN)}, an installed entry point "
                             f"of edgesync.{cls.KIND}s, or a 'package.module:{cls.CALLABLE}' reference")
        return name

    @model_validator(mode="after")
    def _args_only_outside(self) -> "OutsideNamed":
        if self.args and self.name in self.BUILT_IN and self.name not in self.BUILT_IN_WITH_ARGS:
            raise ValueError(f"{self.KIND}.args: {self.name} is built in and takes none (got {sorted(self.args)})")
        return self

    @property
    def id(self) -> str:
        """The component as the runtimes pass it between processes: its name, with its args as JSON (model_id)."""
        return model_id(self.name, self.args)


class DatasetSpec(OutsideNamed):
    KIND, BUILT_IN, CALLABLE = "dataset", DATASET_NAMES, "loader"
    BUILT_IN_WITH_ARGS = tuple(FILE_DATASETS)
    outside = staticmethod(outside_loader)

    name: str = Field("fashion_mnist", description="fashion_mnist, torchvision_fashion_mnist, mnist, cifar10, femnist, "
                      "shakespeare (LEAF's), hf (Hugging Face datasets from local files), image_folder (a folder per "
                      "class); or an installed entry point of edgesync.datasets, or a 'package.module:loader' reference")
    args: dict[str, Any] = Field(default_factory=dict, description="keyword arguments of an outside dataset's "
                                 "loader (JSON values); hf and image_folder take their path and columns here; the "
                                 "other built-in datasets take none")
    root: str | None = Field(None, description="data folder, the only place looked in; must exist on the "
                             "machine that loads the scenario; EDGESYNC_DATA wins over it")
    train_size: int | None = Field(None, ge=1, description="use only the first N training samples")

    @field_validator("root")
    @classmethod
    def _root(cls, root: str | None, info: ValidationInfo) -> str | None:
        """An explicit root is where this machine reads the data: a wrong one is an error here, not a
        silent fallback to another copy. Where $EDGESYNC_DATA wins over it (Fashion-MNIST, CIFAR-10),
        this machine does not read it, and a root meant for the clients' machines is left alone."""
        env_wins = info.data.get("name") not in ("mnist", *FILE_DATASETS) and os.environ.get(DATA_ENV_VAR)
        if root is not None and not env_wins and not Path(root).is_dir():
            raise ValueError("no such directory on this machine")
        return root

    @model_validator(mode="after")
    def _file_dataset_args(self) -> "DatasetSpec":
        """hf's and image_folder's args checked, and their path found on this machine, as for `root`."""
        try:
            check_dataset_args(self.name, self.args, self.root, "dataset.root")
        except (ValueError, FileNotFoundError) as e:  # the loader's own words, which name the key
            raise ValueError(str(e).removeprefix(f"dataset {self.name}: ")) from None
        return self


class ModelSpec(OutsideNamed):
    KIND, BUILT_IN, CALLABLE = "model", MODEL_NAMES, "builder"
    outside = staticmethod(outside_builder)

    name: str = Field("cnn", description="cnn, mlp, vgg_small, resnet18; or an installed entry point of edgesync.models, "
                      "or a 'package.module:builder' reference (a torchvision.models builder too)")
    args: dict[str, Any] = Field(default_factory=dict, description="keyword arguments of an outside model's "
                                 "builder (JSON values); built-in models take none")


class PartitionSpec(Strict):
    # natural: one client per user of a dataset with users (LEAF's); see data/partition.py
    # flwr: a flwr-datasets partitioner by name, with its constructor's args; see data/flwr_partitioners.py
    kind: Literal[PARTITION_KINDS] = "iid"  # type: ignore[valid-type]
    alpha: float = Field(0.5, gt=0, description="Dirichlet concentration (kind: dirichlet)")
    shards_per_client: int = Field(2, ge=1, description="shards per client (kind: shards)")
    partitioner: str | None = Field(None, description="kind flwr: a flwr-datasets partitioner's class name, "
                                    "e.g. DirichletPartitioner")
    args: dict[str, Any] = Field(default_factory=dict, description="kind flwr: the partitioner's constructor "
                                 "arguments (JSON values) but num_partitions, which EdgeSync sets; seed defaults "
                                 "to the scenario's")
    preshuffle: bool = Field(True, description="kind flwr: shuffle the training set with the seed before "
                             "partitioning, as flwr-datasets' FederatedDataset does")
    by: str | None = Field(None, description="kind natural: the natural id: `user` for LEAF's data sets, the "
                           "id column for `hf` (its dataset.args.natural_id); default the dataset's own")

    FLWR_ONLY: ClassVar[tuple[str, ...]] = ("partitioner", "args", "preshuffle")
    OURS_ONLY: ClassVar[tuple[str, ...]] = ("alpha", "shards_per_client", "by")

    @model_validator(mode="after")
    def _keys_of_the_kind(self) -> "PartitionSpec":
        # by value, not by the keys written: a dumped scenario (every key at its value) loads again
        changed = [k for k in type(self).model_fields if getattr(self, k) != type(self).model_fields[k].get_default(
            call_default_factory=True)]
        if self.by is not None and self.kind != "natural":
            raise ValueError(f"partition.by names the natural id of kind natural; kind {self.kind} takes none")
        if self.kind != FLWR_KIND:
            wrong = [k for k in self.FLWR_ONLY if k in changed]
            if wrong:
                raise ValueError(f"partition.{wrong[0]} is only for kind flwr (a flwr-datasets partitioner); "
                                 f"kind {self.kind} takes none")
            return self
        wrong = [k for k in self.OURS_ONLY if k in changed]
        if wrong:
            raise ValueError(f"partition.{wrong[0]} is for EdgeSync's own kinds; kind flwr takes the partitioner's "
                             f"arguments in args (e.g. args: {{alpha: 0.3, partition_by: label}})")
        if self.partitioner is None:
            raise ValueError(f"partition kind flwr needs partitioner, one of: {usable_names()}")
        check_args(self.partitioner, self.args)
        return self
