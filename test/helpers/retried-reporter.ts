// The paced lane retries a failing test once (vitest.config.ts): its assertions are rates and
// times on a shared 2-core machine, where another lane's burst can cost a key a few slots. A
// retry must not hide what happened, so each test that passed only on its second try is listed
// at the end of the run with the error of its first, and a test that fails twice fails the run.
import type { Reporter, TestCase } from 'vitest/node';

export default class RetriedReporter implements Reporter {
  readonly #retried: string[] = [];

  onTestCaseResult(testCase: TestCase): void {
    const { retryCount } = testCase.diagnostic() ?? { retryCount: 0 };
    const result = testCase.result();
    if (retryCount === 0 || result.state !== 'passed') return;
    const first = result.errors?.[0]?.message?.split('\n')[0] ?? '(no error kept)';
    this.#retried.push(`${testCase.module.moduleId.replace(`${process.cwd()}/`, '')} > ${testCase.fullName}: ${first}`);
  }

  onTestRunEnd(): void {
    if (this.#retried.length === 0) return;
    console.log(`\nPassed on a retry (${this.#retried.length}); each failed its first try:`);
    for (const line of this.#retried) console.log(`  RETRIED ${line}`);
  }
}
