/**
 * One startup per instance on the real side: the guard every player's instance puts around the
 * SDK's `onStart`, so that two first calls reaching a fresh instance together start it once.
 *
 * agents@0.21.0 starts an object through partyserver 0.5.10's `#ensureInitialized`
 * (node_modules/partyserver/dist/index.js): it returns early when the status is `started`,
 * awaits a storage read, then runs `onStart` inside `blockConcurrencyWhile` without looking at
 * the status again. Two calls that both pass the first check before either enters
 * `blockConcurrencyWhile` are serialised there, and the second runs `onStart` again once the
 * first is done. In `reattach-after-parent-restart` the reconnect wakes the parent, whose
 * `onConnect` replay (`_replayAgentToolRuns`) and whose startup's agent-tool recovery
 * (`_inspectAgentToolRunForRecovery`, after a `setTimeout(0)`) both resolve the child; each
 * resolve sends the child `_cf_initAsFacet`. Whether the second send reaches the child before
 * the first one's startup began depends on real scheduling only, so in some plays the child's
 * `onStart` ran twice and resumed its script twice (two `story:child-resumed`, every later
 * chunk doubled). No quiet period can order that: the two calls come from the SDK's own code
 * within one step. The port starts an incarnation once, and so does the SDK since 0.32.0
 * (`Lifecycle.start`: concurrent callers share one startup); the guard does the same here, so
 * the play no longer depends on the race (docs/divergences.md, F10).
 */

type Start = (props?: unknown) => unknown;

interface Startable {
  onStart: Start;
  /** The SDK's own start, unguarded: the startup test calls it to show the race. */
  sdkOnStart?: Start;
}

/** Make `agent.onStart` (the SDK's wrapper around the player's own) run once per instance: a
 * later call gets the first call's outcome. A startup that failed may be tried again, as the
 * SDK sets its status back when `onStart` throws. Call it after the SDK's constructor. */
export function startOnce(agent: object): void {
  const holder = agent as Startable;
  const start = holder.onStart;
  holder.sdkOnStart = start;
  let startup: Promise<unknown> | null = null;
  holder.onStart = (props?: unknown) => {
    if (startup === null) {
      const run = (async () => start.call(agent, props))();
      startup = run;
      run.catch(() => {
        if (startup === run) startup = null;
      });
    }
    return startup;
  };
}
