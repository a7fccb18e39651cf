/**
 * The port's retry jitter on the real side. The SDK sleeps `Math.floor(Math.random() * upper)`
 * ms before retrying a failing schedule callback (`jitterBackoff` in `agents/dist/retries.js`,
 * called by `tryN`); the port draws the same formula from its seeded stream, and the plan
 * carries every fraction the Python run drew (`scenarios/diff/jitter.py`). `Math.random` is
 * replaced for the play: a call made from `jitterBackoff` gets the next exported fraction, any
 * other caller (partyserver's routing retry, an MCP elicitation id, the test pool) gets the
 * isolate's own `Math.random`, so no exported value is spent elsewhere.
 *
 * A draw the port did not make at that instant (the SDK retries at another time, or retries
 * something the port does not) is noted, and shows as an error of the play: the exported
 * fraction is still given in order, the port's next one.
 */
import { now } from "./harness";

/** One fraction the port drew: at `t` virtual ms, by the agent `agent` (its alias). */
export interface Draw {
  t: number;
  agent: string;
  fraction: number;
}

interface JitterState {
  draws: Draw[];
  next: number;
  /** Draws that did not match the port's (when, or that there was one at all). */
  notes: string[];
  /** How many draws the SDK's retry path asked for in this play. */
  asked: number;
  real: () => number;
}

const KEY = "__agentsimJitter";

/** The one jitter state of the isolate (the test module and the agents may load this module
 * through two module graphs, as the harness's shared object). */
export function jitter(): JitterState {
  const holder = globalThis as unknown as Record<string, JitterState>;
  if (!holder[KEY]) {
    holder[KEY] = { draws: [], next: 0, notes: [], asked: 0, real: Math.random.bind(Math) };
  }
  return holder[KEY];
}

/** The port's draws for the next play, in order (none: every retry draws a note). */
export function loadDraws(draws: Draw[] | undefined): void {
  const state = jitter();
  state.draws = draws ?? [];
  state.next = 0;
  state.notes = [];
  state.asked = 0;
}

/** Whether the current call of `Math.random` comes from the SDK's retry backoff. */
function fromRetryBackoff(): boolean {
  const stack = new Error().stack ?? "";
  return /\bjitterBackoff\b/.test(stack);
}

/** The next exported fraction for a retry backoff, noting a draw the port did not make. */
function retryFraction(state: JitterState): number {
  state.asked += 1;
  const draw = state.draws[state.next];
  if (draw === undefined) {
    state.notes.push(
      `the SDK drew a retry jitter at ${now()} ms, after the port's ${state.draws.length} draws`
    );
    return state.real();
  }
  state.next += 1;
  if (draw.t !== now()) {
    state.notes.push(
      `the SDK drew retry jitter ${state.next} at ${now()} ms, the port at ${draw.t} ms (${draw.agent})`
    );
  }
  return draw.fraction;
}

/** Replace `Math.random` once: the retry backoff reads the plan's fractions, the rest the
 * isolate's own generator. */
export function installSeededJitter(): void {
  const holder = globalThis as unknown as { __agentsimRandom?: boolean };
  if (holder.__agentsimRandom) return;
  holder.__agentsimRandom = true;
  const state = jitter();
  Math.random = () => (fromRetryBackoff() ? retryFraction(state) : state.real());
}

/** What the play's draws left to report: mismatches, and port draws the SDK never asked for. */
export function jitterNotes(): string[] {
  const state = jitter();
  const out = [...state.notes];
  if (state.next < state.draws.length) {
    const left = state.draws[state.next];
    out.push(
      `the port drew ${state.draws.length} retry jitters, the SDK asked for ${state.asked} ` +
        `(the first not asked for: at ${left.t} ms, ${left.agent})`
    );
  }
  return out;
}
