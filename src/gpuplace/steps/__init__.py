"""The pipeline's steps, one module each: the only place where files cross a step boundary.

A step reads its inputs once into typed values (through the module that owns each file: ``plandir``,
``profiling.io``, ``inventory.jsonfile``, ``deploy.record``, ``loadtest.io``), calls the domain rooms
(``planner``, ``manifests``, ``deploy``, ``loadtest``, ``compare``, ``tracking``...), which take and return
values, and writes its outputs. The KFP components and the CLI commands call a step; nothing below this
room reads a step's files. Modules: :mod:`.profile`, :mod:`.calibrate` (the local engine's step time),
:mod:`.inventory`, :mod:`.plan` (its parameters in :mod:`.plan_params`), :mod:`.predict` (``gpuplace
predict``), :mod:`.deploy`, :mod:`.serve_and_loadtest`, :mod:`.loadtest`, :mod:`.compare`, :mod:`.track`,
:mod:`.teardown`; and :mod:`.run_params`, the run table (the pipelines' and ``gpuplace run``'s parameters).
"""
