"""Test support: what the tests and benchmarks use and users do not, kept out of the shipped package.

``testserver`` is a fault-injecting streaming server, ``localsched`` a kube-scheduler started against
the local control plane, ``sample`` a pair of plausible comparison inputs, ``plans`` plan directories
with hand-made manifests, ``kfp_artifacts`` what stands in for KFP's artifact objects when a
component's ``python_func`` is called directly, and ``kfp_api`` a stand-in for the Kubeflow Pipelines
API (the backend cannot run here). Each says what it stands in for and why.
"""
