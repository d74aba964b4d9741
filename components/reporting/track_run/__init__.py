from gpuplace.components.reporting.track_run.component import track_run

__all__ = ["track_run"]
