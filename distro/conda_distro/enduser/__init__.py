"""What end users get from the main channel: conda's view of it (:mod:`.conda_solve`), snapshots of main
they can pin (:mod:`.snapshots`, :mod:`.take`), lockfiles and SBOMs per snapshot (:mod:`.lockfiles`,
:mod:`.sbom`), and taking main back to a snapshot (:mod:`.rollback`)."""
