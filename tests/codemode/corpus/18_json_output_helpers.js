const reports = await Promise.all(['Oslo', 'Cairo'].map(city => tools.get_weather({ city })));
for (const r of reports) json({ city: r.details.city, tempC: r.details.tempC });
text(`checked ${reports.length} cities`);
return 'ok';
