// A model's usual way to stay polite: batches of 10.
const ids = Array.from({ length: 35 }, (_, i) => i + 1);
const totals = [];
for (let i = 0; i < ids.length; i += 10) {
  const batch = await Promise.all(ids.slice(i, i + 10).map(id => tools.get_order({ id })));
  totals.push(...batch.map(r => r.details.total));
}
return { count: totals.length, sum: totals.reduce((a, b) => a + b, 0) };
