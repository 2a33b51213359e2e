function groupBy<T, K extends string>(items: T[], key: (item: T) => K): Record<K, T[]> {
  const out = {} as Record<K, T[]>;
  for (const item of items) (out[key(item)] ??= []).push(item);
  return out;
}
interface Order { id: number; total: number; status: 'paid' | 'open' }
const orders: Order[] = (await Promise.all([1, 2, 3].map(id => tools.get_order({ id }))))
  .map(r => r.details as Order);
const grouped = groupBy(orders, o => o.status);
return Object.fromEntries(Object.entries(grouped).map(([k, v]) => [k, (v as Order[]).length]));
