// Retry with backoff: the flaky tool fails twice, then answers.
async function withRetry(fn, attempts = 4) {
  let delay = 5;
  for (let i = 1; i <= attempts; i++) {
    try { return await fn(); } catch (e) {
      console.log(`attempt ${i} failed: ${e.message}`);
      await sleep(delay);
      delay *= 2;
    }
  }
  throw new Error('gave up');
}
const r = await withRetry(() => tools.flaky({ key: 'retry-demo' }));
return r.text;
