#include <stdio.h>
#include "proj.h"

int main(void)
{
	printf("alpha %lu beta %lu gamma %.6f\n", alpha(1000), beta("tally"), gamma_sum(100));
	return 0;
}
