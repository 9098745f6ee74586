#include "proj.h"

unsigned long alpha(unsigned long n)
{
	unsigned long s = 0;
	for (unsigned long i = 1; i <= n; i++)
		s += i * i % 7;
	return s;
}
