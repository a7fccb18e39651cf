"""Running a scenario: the steps on a `Simulation`, the liveness phase, then the expectations.

`runner` drives one (scenario, seed), `steps` executes each step kind, `expect` and
`expect_timeline` check the `expect` list, `failure` is what one failure is (a value that reads
as its sentence), `records` is how records are compared, `models`
the scripted model services, `determinism` the same-seed check, `golden` the short logs kept
beside library stories, `failures` the files `agentsim replay` reads, `events_doc` the
generated list of trace events.
"""

__all__: list[str] = []
