"""Everything that imports kfp or the pipelines: the main job (:mod:`.main`, ``gpuplace run``), and
compiling and submitting pipelines (:mod:`.submit`, ``gpuplace compile`` / ``gpuplace submit``).

The pipelines (``gpuplace.pipelines``) and components (``gpuplace.components``) are shipped in the
``gpuplace`` namespace; they live in the repository's top-level ``pipelines/`` and ``components/``
folders, as kubeflow/pipelines-components lays them out.
"""
