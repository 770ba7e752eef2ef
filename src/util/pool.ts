/**
 * Run `fn` over items with at most `limit` in flight, started in item order. The first rejection rejects the
 * returned promise at once; the other workers still go on with the remaining items (callers that must stop
 * early check a flag of their own in `fn`).
 */
export async function pool<T>(items: readonly T[], limit: number, fn: (item: T, index: number) => Promise<void>): Promise<void> {
  let next = 0;
  const workers = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) {
      const i = next++;
      await fn(items[i]!, i);
    }
  });
  await Promise.all(workers);
}
