"""Package proposals (PyTorch RFC-0006 "Proposing a new package for inclusion").

A proposal is ``proposals/<name>.yaml``: the RFC's intake questions as fields (what the package is,
who maintains it and consented to, why PyTorch is a key dependency, ...). One job per module:

* :mod:`.schema`   — :class:`ProposalData` (strict: unknown keys are an error with a did-you-mean hint)
  and the checks of single fields (name, version, GitHub handle);
* :mod:`.load`     — the loaded, line-aware :class:`Proposal`; :func:`load_proposal` / :func:`load_proposals`;
  which proposals a change touches;
* :mod:`.skeleton` — ``conda-distro propose``: :func:`propose` writes a proposal and a v1 recipe skeleton.

The proposal lint (the ``proposal-*`` checks and their runner) is in :mod:`conda_distro.lint`; what the
upstream channels publish is :class:`conda_distro.channels.upstream_index.UpstreamIndex`.
"""

from conda_distro.proposal.load import (
    Proposal,
    ProposalSet,
    changed_proposals,
    load_proposal,
    load_proposals,
    parse_proposal,
    proposal_names,
    proposal_paths,
)
from conda_distro.proposal.schema import (
    PLACEHOLDER_VERSION,
    PROPOSALS_DIR,
    SCHEMA_VERSION,
    Maintainer,
    ProposalData,
    name_problem,
    validate_handle,
    version_problem,
)
from conda_distro.proposal.skeleton import (
    ProposeOptions,
    ProposeResult,
    propose,
    pytorch_pin,
    render_proposal,
    render_recipe_skeleton,
)

__all__ = [
    "PLACEHOLDER_VERSION", "PROPOSALS_DIR", "SCHEMA_VERSION", "Maintainer", "Proposal", "ProposalData",
    "ProposalSet", "ProposeOptions", "ProposeResult", "changed_proposals", "load_proposal", "load_proposals",
    "name_problem", "parse_proposal", "propose", "proposal_names", "proposal_paths", "pytorch_pin",
    "render_proposal", "render_recipe_skeleton", "validate_handle", "version_problem",
]
