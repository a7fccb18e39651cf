/**
 * A vitest reporter (it runs in Node, outside workerd) that collects what each played plan
 * left in its test's `meta` and writes `{plan name: {plays, error}}` as JSON to the file named
 * by AGENTSIM_DIFF_OUT, which `agentsim diff` reads back.
 */
import { writeFileSync } from "node:fs";

interface CaseLike {
  name: string;
  meta(): Record<string, unknown>;
  result(): { state: string; errors?: readonly { message?: string }[] };
}

export default class PlayReporter {
  private readonly results: Record<string, { plays: unknown; error: string | null }> = {};

  onTestCaseResult(testCase: CaseLike): void {
    const result = testCase.result();
    const error =
      result.state === "failed"
        ? (result.errors ?? []).map((e) => e.message ?? String(e)).join("; ") || "failed"
        : null;
    this.results[testCase.name] = { plays: testCase.meta().agentsimPlays ?? null, error };
  }

  onTestRunEnd(): void {
    const out = process.env.AGENTSIM_DIFF_OUT;
    if (out) writeFileSync(out, JSON.stringify(this.results));
  }
}
