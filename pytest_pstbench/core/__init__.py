"""Kind-independent machinery: the protocol (typed, validated at load), run files (transactional store,
format version), statistics, the score cache, the gate and the run-kind interface (`kinds`), errors and
paths. Nothing here knows whether a track is paired or selection."""
