const header = await MCP.time.$api('convertTime');
const names: string[] = header.tools.map((t: { method: string }) => t.method);
const results = await Promise.all(['Asia/Tokyo', 'Asia/Kolkata'].map(tz =>
  MCP.time.convertTime({ source_timezone: 'UTC', time: '00:00', target_timezone: tz })));
return { names, offsets: results.map(r => (r.structuredContent ?? JSON.parse(r.content[0].text)).time_difference) };
