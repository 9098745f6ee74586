#include "proj.h"

double gamma_sum(int n)
{
	double s = 0;
	for (int i = 1; i <= n; i++)
		s += 1.0 / ((double)i * i);
	return s;
}
